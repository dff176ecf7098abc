#include "pkg/render/backend_order.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
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
  return next;
}

PackedOrder::PackedOrder(const EndpointOrder& order) {
  size_t size = 0;
  for (const std::string& entry : order) size += sizeof(uint32_t) + entry.size();
  bytes_.reserve(size);
  for (const std::string& entry : order) {
    const auto length = uint32_t(entry.size());
    bytes_.append(reinterpret_cast<const char*>(&length), sizeof length);
    bytes_.append(entry);
  }
}

EndpointOrder PackedOrder::unpacked() const {
  EndpointOrder order;
  for (size_t at = 0; at < bytes_.size();) {
    uint32_t length;
    std::memcpy(&length, bytes_.data() + at, sizeof length);
    at += sizeof length;
    order.emplace_back(bytes_, at, length);
    at += length;
  }
  return order;
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

// The service's entry: found, or (a render on one thread) made. `find` first: with the entries
// prepared (prepareServices), threads rendering different services only read the outer map.
template <typename Map>
typename Map::mapped_type& entryOf(Map& all, const std::string& serviceKey) {
  auto it = all.find(serviceKey);
  return it != all.end() ? it->second : all[serviceKey];
}

}  // namespace

void BackendOrders::prepareServices(const std::vector<std::string>& serviceKeys) {
  for (const std::string& key : serviceKeys) {
    orders_.try_emplace(key);
    tables_.try_emplace(key);
  }
}

EndpointOrder BackendOrders::place(const std::string& serviceKey, const std::string& owner,
                                   const std::vector<std::string>& endpoints,
                                   const std::vector<std::string>& adoptFrom) {
  auto& byOwner = entryOf(orders_, serviceKey);
  auto it = byOwner.find(owner);
  EndpointOrder order =
      stickyOrder(it != byOwner.end() ? it->second.unpacked() : firstAdopted(adopted_, adoptFrom), endpoints);
  byOwner.insert_or_assign(owner, PackedOrder(order));
  return order;
}

const HashTable& BackendOrders::placeTable(const std::string& serviceKey, const std::string& owner,
                                          const std::vector<std::string>& endpoints,
                                          const std::vector<std::string>& adoptFrom) {
  auto& byOwner = entryOf(tables_, serviceKey);
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
  orders_[serviceKey][owner] = PackedOrder(order);
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
