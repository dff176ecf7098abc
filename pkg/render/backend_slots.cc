#include "pkg/render/backend_slots.h"

#include <algorithm>
#include <set>

namespace kpn::render {

const Slot BackendSlots::kEmpty{};

uint32_t BackendSlots::capacityFor(size_t n) {
  uint32_t cap = 4;  // room to grow without moving: most services change by an endpoint or two
  while (cap < n) cap *= 2;
  return cap;
}

uint32_t BackendSlots::allocate(const std::string& map, uint32_t capacity) {
  Space& sp = spaces_[map];
  auto f = sp.free.find(capacity);
  if (f != sp.free.end() && !f->second.empty()) {
    uint32_t base = f->second.back();
    f->second.pop_back();
    if (f->second.empty()) sp.free.erase(f);
    return base;
  }
  uint32_t base = sp.next;
  sp.next += capacity;
  return base;
}

void BackendSlots::release(const std::string& owner) {
  auto it = slots_.find(owner);
  if (it == slots_.end()) return;
  spaces_[it->second.map].free[it->second.capacity].push_back(it->second.base);
  slots_.erase(it);
}

void BackendSlots::adopt(const std::string& owner, Slot slot) {
  Space& sp = spaces_[slot.map];
  sp.next = std::max(sp.next, slot.base + slot.capacity);
  slots_[owner] = std::move(slot);
}

const Slot& BackendSlots::place(const std::string& owner, const std::string& map,
                                const std::vector<std::string>& endpoints) {
  if (endpoints.empty()) {
    release(owner);
    return kEmpty;
  }
  auto it = slots_.find(owner);
  if (it != slots_.end() && (it->second.map != map || it->second.capacity < endpoints.size())) {
    // Outgrown (or moved to another map): start over in a fresh range, keeping the relative order.
    std::vector<std::string> keep = it->second.order;
    release(owner);
    Slot s{map, allocate(map, capacityFor(endpoints.size())), capacityFor(endpoints.size()), {}};
    std::set<std::string> want(endpoints.begin(), endpoints.end());
    for (const auto& e : keep)
      if (want.erase(e)) s.order.push_back(e);
    s.order.insert(s.order.end(), want.begin(), want.end());
    return slots_[owner] = std::move(s);
  }
  if (it == slots_.end()) {
    Slot s{map, allocate(map, capacityFor(endpoints.size())), capacityFor(endpoints.size()), {}};
    s.order = endpoints;
    std::sort(s.order.begin(), s.order.end());
    return slots_[owner] = std::move(s);
  }
  // Sticky update: survivors keep their index; newcomers fill holes, then append; if endpoints
  // went away, the last ones move into the remaining holes so indexes stay dense [0, N).
  Slot& s = it->second;
  std::set<std::string> want(endpoints.begin(), endpoints.end());
  std::vector<std::string> next(s.order.size());
  std::vector<size_t> holes;
  for (size_t i = 0; i < s.order.size(); ++i) {
    if (want.erase(s.order[i])) next[i] = s.order[i];
    else holes.push_back(i);
  }
  auto newcomer = want.begin();  // sorted: deterministic placement
  for (size_t h : holes) {
    if (newcomer == want.end()) break;
    next[h] = *newcomer++;
  }
  for (; newcomer != want.end(); ++newcomer) next.push_back(*newcomer);
  // Compact: move the last filled entries into any holes left.
  for (;;) {
    while (!next.empty() && next.back().empty()) next.pop_back();
    auto hole = std::find(next.begin(), next.end(), std::string());
    if (hole == next.end()) break;
    *hole = next.back();
    next.pop_back();
  }
  s.order = std::move(next);
  return s;
}

}  // namespace kpn::render
