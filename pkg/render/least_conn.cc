#include "pkg/render/least_conn.h"

#include <algorithm>
#include <map>

namespace kpn::render {

bool LeastConnChoices::set(const std::string& serviceKey, const std::string& owner, std::vector<std::string> values) {
  std::vector<std::string>& current = choices_[serviceKey][owner];
  if (current == values) return false;
  current = std::move(values);
  return true;
}

const std::vector<std::string>* LeastConnChoices::find(const std::string& serviceKey, const std::string& owner) const {
  auto s = choices_.find(serviceKey);
  if (s == choices_.end()) return nullptr;
  auto o = s->second.find(owner);
  return o == s->second.end() ? nullptr : &o->second;
}

std::vector<std::string> leastConnSlots(const EndpointOrder& order, const std::vector<std::string>* chosen) {
  std::vector<std::string> slots;
  if (chosen) {
    // An endpoint named n times holds n slots (a burst's share, lc_counts.h), in the order's order.
    std::map<std::string, size_t> times;
    for (const std::string& v : *chosen) ++times[v];
    for (const std::string& v : order)
      if (auto t = times.find(v); t != times.end())
        for (size_t i = 0; i < t->second && slots.size() < services::kLeastConnSlots; ++i) slots.push_back(v);
  }
  if (slots.empty())
    slots.assign(order.begin(), order.begin() + static_cast<long>(std::min(order.size(), services::kLeastConnSlots)));
  return slots;
}

}  // namespace kpn::render
