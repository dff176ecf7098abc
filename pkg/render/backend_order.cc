#include "pkg/render/backend_order.h"

#include <algorithm>
#include <set>

namespace kpn::render {

EndpointOrder stickyOrder(const EndpointOrder& previous, const std::vector<std::string>& endpoints) {
  std::set<std::string> want(endpoints.begin(), endpoints.end());
  EndpointOrder next(previous.size());
  std::vector<size_t> holes;
  for (size_t i = 0; i < previous.size(); ++i) {
    if (want.erase(previous[i])) next[i] = previous[i];
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
  // Orders live as long as their service: growth slack (16 slots for 10 endpoints) was ~2 MiB at
  // 10k services.
  next.shrink_to_fit();
  return next;
}

namespace {
// What start-up adopted for the first of `destinations` that has something (else empty).
template <typename Map>
typename Map::mapped_type firstAdopted(const Map& adopted, const std::vector<std::string>& destinations) {
  for (const std::string& dest : destinations) {
    auto a = adopted.find(dest);
    if (a != adopted.end()) return a->second;
  }
  return {};
}
}  // namespace

const EndpointOrder& BackendOrders::place(const std::string& serviceKey, const std::string& owner,
                                          const std::vector<std::string>& endpoints,
                                          const std::vector<std::string>& adoptFrom) {
  auto& byOwner = orders_[serviceKey];
  auto it = byOwner.find(owner);
  if (it == byOwner.end()) it = byOwner.emplace(owner, firstAdopted(adopted_, adoptFrom)).first;
  it->second = stickyOrder(it->second, endpoints);
  return it->second;
}

const HashTable& BackendOrders::placeTable(const std::string& serviceKey, const std::string& owner,
                                          const std::vector<std::string>& endpoints,
                                          const std::vector<std::string>& adoptFrom) {
  auto& byOwner = tables_[serviceKey];
  auto it = byOwner.find(tableOwner(owner));
  if (it == byOwner.end()) it = byOwner.emplace(tableOwner(owner), firstAdopted(adoptedTables_, adoptFrom)).first;
  it->second = updateHashTable(it->second, endpoints);
  return it->second;
}

namespace {
template <typename Map>
void retainIn(Map& all, const std::string& serviceKey, const std::vector<std::string>& keep) {
  auto s = all.find(serviceKey);
  if (s == all.end()) return;
  for (auto it = s->second.begin(); it != s->second.end();) {
    if (std::find(keep.begin(), keep.end(), it->first) == keep.end()) it = s->second.erase(it);
    else ++it;
  }
  if (s->second.empty()) all.erase(s);
}
}  // namespace

void BackendOrders::retain(const std::string& serviceKey, const std::vector<std::string>& keep) {
  retainIn(orders_, serviceKey, keep);
  retainIn(tables_, serviceKey, keep);
}

void BackendOrders::adoptOwner(const std::string& serviceKey, const std::string& owner, EndpointOrder order) {
  orders_[serviceKey][owner] = std::move(order);
}

void BackendOrders::adoptDestination(const std::string& destination, EndpointOrder order) {
  adopted_[destination] = std::move(order);
}

void BackendOrders::adoptListedSlots(const std::string& destination, EndpointOrder slots) {
  adoptedSlots_[destination] = std::move(slots);
}

const EndpointOrder* BackendOrders::adoptedSlots(const std::vector<std::string>& destinations) const {
  for (const std::string& dest : destinations) {
    auto a = adoptedSlots_.find(dest);
    if (a != adoptedSlots_.end()) return &a->second;
  }
  return nullptr;
}

void BackendOrders::adoptTable(const std::string& destination, HashTable table) {
  adoptedTables_[destination] = std::move(table);
}

}  // namespace kpn::render
