// The sticky order of each endpoint set's slots. A service port has up to two endpoint sets per
// family ("all": every usable endpoint; "local": this node's), and every destination that
// dispatches to a set (ClusterIP, external IPs, LB IPs, NodePort) holds that set's endpoints at
// slots 0..N-1 in that order. Orders survive syncs, so swapping one endpoint for another changes one
// element per destination, an added endpoint takes slot N, and a removed one is replaced by the
// last (which moves), never a renumbering of the whole service.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pkg/render/source_hash_table.h"

namespace kpn::render {

using EndpointOrder = std::vector<std::string>;  // element value JSON (address . port); index = slot

// An order as BackendOrders keeps it from one sync to the next: every entry's text in one block,
// each after its length. Kept as vectors of strings, the orders of 10k services x 10 endpoints were
// ~8 MB of the settled heap (a block per entry besides the vector's); packed, an order is one
// block. A render unpacks the orders of the services it renders.
class PackedOrder {
 public:
  PackedOrder() = default;
  explicit PackedOrder(const EndpointOrder& order);
  EndpointOrder unpacked() const;
  bool operator==(const PackedOrder& o) const { return bytes_ == o.bytes_; }

 private:
  std::string bytes_;
};

class BackendOrders {
 public:
  // The order for `owner` (e.g. "ip all/tcp/http") of service `serviceKey` holding exactly
  // `endpoints` (element value JSON, any order), updated stickily from its previous order. For an
  // owner seen for the first time, `adoptFrom` names destinations whose listed slots (start-up)
  // may give the order to keep; otherwise the endpoints are sorted.
  EndpointOrder place(const std::string& serviceKey, const std::string& owner,
                      const std::vector<std::string>& endpoints, const std::vector<std::string>& adoptFrom = {});
  // Source hash: the lookup table of `owner` (source_hash_table.h) holding exactly `endpoints`,
  // updated from its previous table; for an owner seen for the first time, the table listed at
  // start-up for one of `adoptFrom`, if any. Its owner name is its own: tableOwner(owner).
  const HashTable& placeTable(const std::string& serviceKey, const std::string& owner,
                              const std::vector<std::string>& endpoints, const std::vector<std::string>& adoptFrom = {});
  static std::string tableOwner(const std::string& owner) { return "hash " + owner; }
  // Before a render on several threads: an (empty) entry for each of `serviceKeys`, so that
  // place() and placeTable() for different services touch different inner maps and never insert
  // into the outer ones the threads share. retain() drops the entries that stay empty.
  void prepareServices(const std::vector<std::string>& serviceKeys);
  // Forgets every order and table of the service except those named in `keep`.
  void retain(const std::string& serviceKey, const std::vector<std::string>& keep);
  void erase(const std::string& serviceKey) {
    orders_.erase(serviceKey);
    tables_.erase(serviceKey);
  }

  // Start-up: an order found in the kernel, by owner (the chain-per-service layout, whose service
  // chains name their service) or by destination ("<family> <map>|<destination key parts>", the
  // shared layout, whose elements are keyed by destination and slot).
  void adoptOwner(const std::string& serviceKey, const std::string& owner, EndpointOrder order);
  void adoptDestination(const std::string& destination, EndpointOrder order);
  void adoptTable(const std::string& destination, HashTable table);
  // Every destination's dense slots as listed, repeats included: a least-connection destination's
  // are its choice (least_conn.h), a burst's shares naming an endpoint more than once.
  void adoptListedSlots(const std::string& destination, EndpointOrder slots);
  // What start-up listed at the first of `destinations` that had slots (null: none, or after
  // dropAdopted).
  const EndpointOrder* adoptedSlots(const std::vector<std::string>& destinations) const;
  // After the first full render: adopted destinations not claimed by then never will be.
  void dropAdopted() {
    adopted_.clear();
    adoptedTables_.clear();
    adoptedSlots_.clear();
  }

  const std::map<std::string, std::map<std::string, PackedOrder>>& orders() const { return orders_; }
  bool operator==(const BackendOrders& o) const { return orders_ == o.orders_ && tables_ == o.tables_; }

 private:
  std::map<std::string, std::map<std::string, PackedOrder>> orders_;    // service -> owner -> order
  std::map<std::string, std::map<std::string, HashTable>> tables_;      // service -> table owner -> table
  std::map<std::string, EndpointOrder> adopted_;                         // destination -> order
  std::map<std::string, HashTable> adoptedTables_;                       // destination -> table
  std::map<std::string, EndpointOrder> adoptedSlots_;                    // destination -> listed slots
};

// The sticky update itself: survivors keep their slot, newcomers (sorted) fill holes and then
// append; if endpoints went away, the last ones move into the holes left so slots stay [0, N).
EndpointOrder stickyOrder(const EndpointOrder& previous, const std::vector<std::string>& endpoints);

}  // namespace kpn::render
