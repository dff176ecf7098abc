#include "pkg/render/least_conn.h"

#include <algorithm>
#include <set>

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
    const std::set<std::string> want(chosen->begin(), chosen->end());
    for (const std::string& v : order)
      if (want.count(v) && slots.size() < kLeastConnSlots) slots.push_back(v);
  }
  if (slots.empty()) slots.assign(order.begin(), order.begin() + static_cast<long>(std::min(order.size(), kLeastConnSlots)));
  return slots;
}

}  // namespace kpn::render
