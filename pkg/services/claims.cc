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
  Held next{dests.empty() ? std::string() : rank, std::move(dests)};
  auto old = byService_.find(serviceKey);
  if (old != byService_.end() && old->second == next) return;
  auto winner = [](const std::map<std::string, std::string>& c) { return c.empty() ? std::string() : c.begin()->second; };
  auto note = [&](const std::string& before, const std::string& after) {
    if (!affected || before == after) return;
    for (const std::string* k : {&before, &after})
      if (!k->empty() && *k != serviceKey) affected->insert(*k);
  };
  if (old != byService_.end()) {
    for (const auto& d : old->second.dests) {
      auto c = claims_.find(d);
      if (c == claims_.end()) continue;
      std::string before = winner(c->second);
      c->second.erase(old->second.rank);
      note(before, winner(c->second));
      if (c->second.empty()) claims_.erase(c);
    }
    byService_.erase(old);
  }
  if (next.dests.empty()) return;
  for (const auto& d : next.dests) {
    auto& c = claims_[d];
    std::string before = winner(c);
    c.emplace(next.rank, serviceKey);
    note(before, winner(c));
  }
  byService_.emplace(serviceKey, std::move(next));
}

bool DestinationClaims::owns(const std::string& serviceKey, const std::string& dest) const {
  auto c = claims_.find(dest);
  return c == claims_.end() || c->second.empty() || c->second.begin()->second == serviceKey;
}

std::string DestinationClaims::owner(const std::string& dest) const {
  auto c = claims_.find(dest);
  return c == claims_.end() || c->second.empty() ? std::string() : c->second.begin()->second;
}

}  // namespace kpn::services
