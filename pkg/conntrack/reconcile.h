// One reconcile pass over one family's conntrack table: stream the dump, test each flow against
// the frontends, delete the stale ones in batches while the dump goes on. Memory is the dump's
// receive buffer plus one batch, whatever the size of the table (upstream's reconciler listed the
// whole table into memory first: 12 GB RSS at 7.5M entries, kubernetes issue 129982).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "pkg/conntrack/flow.h"
#include "pkg/conntrack/frontends.h"

namespace kpn::conntrack {

// The kernel's conntrack table (netlink_table.h), or a fake in tests.
class FlowTable {
 public:
  virtual ~FlowTable() = default;
  // Calls fn for every entry of `family` (AF_INET, AF_INET6) and `proto` (IPPROTO_UDP, _TCP,
  // _SCTP) until fn returns false. fn may call destroy. False on error.
  virtual bool dump(uint8_t family, uint8_t proto, const std::function<bool(const Flow&)>& fn, std::string* error) = 0;
  // Deletes these entries; returns how many the kernel deleted (an entry already gone is not an
  // error and not a deletion). Sets *error on a failure of the socket itself.
  virtual size_t destroy(const std::vector<Flow>& flows, std::string* error) = 0;
};

struct FamilyResult {
  size_t scanned = 0, stale = 0, deleted = 0;
  double seconds = 0;
  std::string error;  // empty: the pass ran to its end
};

constexpr size_t kDeleteBatch = 256;

// One pass over the entries of one family and protocol: those `stale` picks are deleted.
// `cancel` (may be null): once true, the pass ends at the next entry (daemon shutdown).
FamilyResult deleteFlows(FlowTable& table, uint8_t family, uint8_t proto, const std::function<bool(const Flow&)>& stale,
                         size_t batch = kDeleteBatch, const std::atomic<bool>* cancel = nullptr);

// The UDP reconcile (frontends.h) as one such pass.
FamilyResult reconcileFamily(FlowTable& table, uint8_t family, const Frontends& frontends, size_t batch = kDeleteBatch,
                             const std::atomic<bool>* cancel = nullptr);

}  // namespace kpn::conntrack
