#include "pkg/conntrack/udp_services.h"

#include "pkg/services/proxied.h"

namespace kpn::conntrack {

namespace {

// The entry for `key` in the current state, or nullopt when the cleanup does not look at it.
std::optional<UdpService> entryOf(const state::ClusterState& st, const services::NodeConfig& cfg,
                                  const std::string& key) {
  auto it = st.services.find(key);
  if (it == st.services.end() || !hasUdpPort(*it->second, cfg)) return std::nullopt;
  UdpService e{it->second, {}};
  if (auto s = st.slicesByService.find(key); s != st.slicesByService.end())
    for (const auto& [name, slice] : s->second) e.slices.push_back(slice);
  return e;
}

}  // namespace

bool hasUdpPort(const api::Service& svc, const services::NodeConfig& cfg) {
  if (!services::serviceIsProxied(svc, cfg)) return false;
  for (const auto& p : svc.ports)
    if (p.protocol == api::Protocol::UDP) return true;
  return false;
}

void UdpServiceIndex::update(const state::ClusterState& st, const services::NodeConfig& cfg,
                             const std::set<std::string>* changed) {
  if (!changed) {
    auto all = std::make_shared<UdpServices>();
    for (const auto& [key, svc] : st.services)
      if (auto e = entryOf(st, cfg, key)) all->emplace(key, std::move(*e));
    if (*all != *current_) current_ = std::move(all);
    return;
  }
  // Copy only when a UDP service came, went or changed: most syncs touch TCP services only.
  std::shared_ptr<UdpServices> next;
  for (const auto& key : *changed) {
    auto e = entryOf(st, cfg, key);
    auto old = current_->find(key);
    const bool had = old != current_->end();
    if (!e && !had) continue;
    if (e && had && *e == old->second) continue;
    if (!next) next = std::make_shared<UdpServices>(*current_);
    if (e)
      (*next)[key] = std::move(*e);
    else
      next->erase(key);
  }
  if (next) current_ = std::move(next);
}

}  // namespace kpn::conntrack
