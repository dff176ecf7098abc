// Where each service port's endpoints live in the sharded backends maps.
// A service port owns the key range [base, base+capacity) of one map; its chain says
// `numgen random mod N offset base`. Ranges and the order of endpoints inside them are sticky
// across syncs, so adding an endpoint is one element, removing one moves at most one other, and
// swapping one for another is a single element change — never a renumbering of the service.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kpn::render {

struct Slot {
  std::string map;                 // e.g. backends-tcp-17
  uint32_t base = 0;
  uint32_t capacity = 0;
  std::vector<std::string> order;  // endpoint values (element value JSON), index = key - base
  bool operator==(const Slot& o) const {
    return map == o.map && base == o.base && capacity == o.capacity && order == o.order;
  }
};

class BackendSlots {
 public:
  // Places `endpoints` (element value JSON, any order) for the chain `owner` in `map`, reusing
  // the owner's current range and positions where possible. Returns the slot; slot.order has
  // exactly endpoints.size() entries. Empty endpoints release the slot and return an empty one.
  const Slot& place(const std::string& owner, const std::string& map, const std::vector<std::string>& endpoints);
  void release(const std::string& owner);
  // Start-up: take over a range found in the kernel.
  void adopt(const std::string& owner, Slot slot);

  const std::map<std::string, Slot>& slots() const { return slots_; }
  bool operator==(const BackendSlots& o) const { return slots_ == o.slots_ && spaces_ == o.spaces_; }

  static uint32_t capacityFor(size_t n);

 private:
  struct Space {
    uint32_t next = 0;                                // bump pointer
    std::map<uint32_t, std::vector<uint32_t>> free;   // capacity -> released bases
    bool operator==(const Space& o) const { return next == o.next && free == o.free; }
  };
  uint32_t allocate(const std::string& map, uint32_t capacity);
  std::map<std::string, Slot> slots_;
  std::map<std::string, Space> spaces_;
  static const Slot kEmpty;
};

}  // namespace kpn::render
