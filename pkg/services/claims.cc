#include "pkg/services/claims.h"

#include <algorithm>

namespace kpn::services {

std::string ipDestination(const std::string& ip, api::Protocol proto, int32_t port) {
  return "ip " + ip + " " + api::protocolName(proto) + " " + std::to_string(port);
}

std::string nodePortDestination(api::Protocol proto, int32_t nodePort) {
  return std::string("nodeport ") + api::protocolName(proto) + " " + std::to_string(nodePort);
}

std::vector<std::string> loadBalancerVIPs(const api::Service& svc) {
  std::vector<std::string> out;
  for (const auto& in : svc.loadBalancerIngress)
    if (!in.ip.empty() && in.ipMode != "Proxy") out.push_back(in.ip);
  return out;
}

std::vector<std::string> destinationsOf(const api::Service& svc) {
  std::vector<std::string> out;
  std::vector<std::string> ips = svc.clusterIPs;
  ips.insert(ips.end(), svc.externalIPs.begin(), svc.externalIPs.end());
  for (const auto& vip : loadBalancerVIPs(svc)) ips.push_back(vip);
  for (const auto& p : svc.ports) {
    for (const auto& ip : ips) out.push_back(ipDestination(ip, p.protocol, p.port));
    if (p.nodePort > 0) out.push_back(nodePortDestination(p.protocol, p.nodePort));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string claimRank(const api::Service& svc) {
  // RFC 3339 timestamps of the API server (UTC, "Z") sort as text.
  return (svc.meta.creationTimestamp.empty() ? "1" : "0" + svc.meta.creationTimestamp) + '\x01' + svc.meta.ns + "/" +
         svc.meta.name;
}

void DestinationClaims::update(const std::string& serviceKey, const api::Service* svc, std::set<std::string>* affected) {
  if (svc) update(serviceKey, claimRank(*svc), destinationsOf(*svc), affected);
  else update(serviceKey, std::string(), {}, affected);
}

void DestinationClaims::update(const std::string& serviceKey, const std::string& rank, std::vector<std::string> dests,
                               std::set<std::string>* affected) {
  std::sort(dests.begin(), dests.end());
  dests.erase(std::unique(dests.begin(), dests.end()), dests.end());
  auto old = byService_.find(serviceKey);
  if (old != byService_.end() && old->second.rank == rank && old->second.dests.size() == dests.size() &&
      std::equal(dests.begin(), dests.end(), old->second.dests.begin(),
                 [](const std::string& d, const std::string* held) { return d == *held; }))
    return;
  auto winner = [](const std::vector<Claimant>& c) { return c.empty() ? std::string() : c.front()->first; };
  auto note = [&](const std::string& before, const std::string& after) {
    if (!affected || before == after) return;
    for (const std::string* k : {&before, &after})
      if (!k->empty() && *k != serviceKey) affected->insert(*k);
  };
  if (old != byService_.end()) {
    for (const std::string* d : old->second.dests) {
      auto c = claims_.find(*d);
      if (c == claims_.end()) continue;
      std::string before = winner(c->second);
      c->second.erase(std::remove(c->second.begin(), c->second.end(), &*old), c->second.end());
      note(before, winner(c->second));
      if (c->second.empty()) claims_.erase(c);
    }
    byService_.erase(old);
  }
  if (dests.empty()) return;
  auto& entry = *byService_.emplace(serviceKey, Held{rank, {}}).first;
  entry.second.dests.reserve(dests.size());
  for (auto& d : dests) {
    auto c = claims_.try_emplace(std::move(d)).first;
    entry.second.dests.push_back(&c->first);
    std::string before = winner(c->second);
    auto at = std::upper_bound(c->second.begin(), c->second.end(), rank,
                               [](const std::string& r, Claimant held) { return r < held->second.rank; });
    c->second.insert(at, &entry);
    note(before, winner(c->second));
  }
}

DestinationClaims& DestinationClaims::operator=(const DestinationClaims& o) {
  if (this == &o) return *this;
  clear();
  for (const auto& [key, held] : o.byService_) {
    std::vector<std::string> dests;
    for (const std::string* d : held.dests) dests.push_back(*d);
    update(key, held.rank, std::move(dests), nullptr);
  }
  return *this;
}

DestinationClaims& DestinationClaims::operator=(DestinationClaims&& o) noexcept {
  if (this == &o) return *this;
  // std::map's move hands over its nodes (same allocator): no element is copied or moved.
  claims_ = std::move(o.claims_);
  byService_ = std::move(o.byService_);
  o.clear();
  return *this;
}

bool DestinationClaims::operator==(const DestinationClaims& o) const {
  // claims_ follows from byService_.
  return std::equal(byService_.begin(), byService_.end(), o.byService_.begin(), o.byService_.end(),
                    [](const auto& a, const auto& b) {
                      return a.first == b.first && a.second.rank == b.second.rank &&
                             std::equal(a.second.dests.begin(), a.second.dests.end(), b.second.dests.begin(),
                                        b.second.dests.end(),
                                        [](const std::string* x, const std::string* y) { return *x == *y; });
                    });
}

bool DestinationClaims::owns(const std::string& serviceKey, const std::string& dest) const {
  auto c = claims_.find(dest);
  return c == claims_.end() || c->second.empty() || c->second.front()->first == serviceKey;
}

std::string DestinationClaims::owner(const std::string& dest) const {
  auto c = claims_.find(dest);
  return c == claims_.end() || c->second.empty() ? std::string() : c->second.front()->first;
}

}  // namespace kpn::services
