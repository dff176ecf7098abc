// Source hash: a destination's lookup table of M slots, which the packet indexes with
// `jhash ip saddr mod M` (the kernel's reciprocal_scale: slot = hash * M >> 32), so the same client
// address reaches the same endpoint with no state in the data path.
//
// The table is sticky (resilient hashing, as switches and Linux's resilient nexthop groups do):
// each change starts from the table before it and moves only what it must. An endpoint that
// leaves gives its slots to the others, one that comes takes its share from the fullest; every
// endpoint always holds floor(M/N) or ceil(M/N) slots. Growing doubles M and each new slot takes
// its parent's endpoint (slot s of M is slots 2s and 2s+1 of 2M for every hash), so a size change
// moves nobody by itself. Shrinking halves M (after the count fell to a quarter of what the table
// is sized for) only when that costs at most half an endpoint's share. So one endpoint added or
// removed moves at most 1/N + 1/M of the clients, and half a share more in the change that halves
// the table. A stateless table cannot do this: a rule that moves only the changed endpoint's slots
// whatever the set is rendezvous hashing, whose shares are uneven (docs/schedulers.md).
//
// The price of the state: the table depends on the changes this node saw, not only on the set of
// endpoints. It is adopted from our table at a restart (slot_adoption.h); a node that starts
// without one builds it afresh, and may then send a client elsewhere than an older node does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kpn::render {

// One seed for every table: a client hashes alike after a restart and on every node.
inline constexpr uint32_t kSourceHashSeed = 0x6b706e21;

inline constexpr uint32_t kSlotsPerEndpoint = 8;  // at least: each share within 1/8 of equal
inline constexpr uint32_t kMinHashSlots = 16;
inline constexpr uint32_t kMaxHashSlots = 16384;  // above 2048 endpoints the shares get coarser

struct HashTable {
  std::vector<std::string> endpoints;  // element value JSON ("address . port"), sorted
  std::vector<uint32_t> slots;         // slot -> index into endpoints
  size_t size() const { return slots.size(); }
  const std::string& at(size_t slot) const { return endpoints[slots[slot]]; }
  bool operator==(const HashTable& o) const { return endpoints == o.endpoints && slots == o.slots; }
};

// The table a listing holds: each slot's value, in slot order (start-up adoption).
HashTable hashTableFromSlots(const std::vector<std::string>& values);

// The table for `endpoints` (distinct values, at least two), moved as little as possible from
// `previous` (an empty table: a new destination, M = the smallest power of two with 8 slots per
// endpoint, at least 16).
HashTable updateHashTable(const HashTable& previous, const std::vector<std::string>& endpoints);

}  // namespace kpn::render
