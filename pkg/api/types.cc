#include "pkg/api/types.h"

#include <tuple>

namespace kpn::api {

const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::TCP: return "tcp";
    case Protocol::UDP: return "udp";
    case Protocol::SCTP: return "sctp";
  }
  return "tcp";  // unreachable; keeps -Wreturn-type quiet
}

// Every comparison below lists every field: a forgotten field would make the store treat a real
// change as "unchanged" and the renderer would never see it.

bool operator==(const ServicePort& a, const ServicePort& b) {
  return std::tie(a.name, a.protocol, a.port, a.nodePort, a.targetPort) ==
         std::tie(b.name, b.protocol, b.port, b.nodePort, b.targetPort);
}

bool operator==(const LoadBalancerIngress& a, const LoadBalancerIngress& b) {
  return std::tie(a.ip, a.hostname, a.ipMode) == std::tie(b.ip, b.hostname, b.ipMode);
}

bool operator==(const EndpointPort& a, const EndpointPort& b) {
  return std::tie(a.name, a.protocol, a.port) == std::tie(b.name, b.protocol, b.port);
}

bool operator==(const EndpointConditions& a, const EndpointConditions& b) {
  return std::tie(a.ready, a.serving, a.terminating) == std::tie(b.ready, b.serving, b.terminating);
}

bool operator==(const Endpoint& a, const Endpoint& b) {
  return a.address == b.address && a.conditions == b.conditions && a.nodeName == b.nodeName && a.zone == b.zone &&
         a.addresses() == b.addresses() && a.hintZones() == b.hintZones() && a.hintNodes() == b.hintNodes();
}

std::vector<std::string> Endpoint::addresses() const {
  std::vector<std::string> out;
  if (address.empty()) return out;
  out.reserve(1 + (rare_ ? rare_->moreAddresses.size() : 0));
  out.push_back(address);
  if (rare_) out.insert(out.end(), rare_->moreAddresses.begin(), rare_->moreAddresses.end());
  return out;
}

void Endpoint::setAddresses(std::vector<std::string> all) {
  Rare r = rare_ ? *rare_ : Rare{};
  address = all.empty() ? std::string() : std::move(all.front());
  if (!all.empty()) all.erase(all.begin());
  r.moreAddresses = std::move(all);
  setRare(std::move(r));
}

namespace {
const std::vector<std::string>& noNames() {
  static const auto* none = new std::vector<std::string>;
  return *none;
}
}  // namespace

const std::vector<std::string>& Endpoint::hintZones() const { return rare_ ? rare_->hintZones : noNames(); }
const std::vector<std::string>& Endpoint::hintNodes() const { return rare_ ? rare_->hintNodes : noNames(); }

void Endpoint::setHints(std::vector<std::string> zones, std::vector<std::string> nodes) {
  Rare r = rare_ ? *rare_ : Rare{};
  r.hintZones = std::move(zones);
  r.hintNodes = std::move(nodes);
  setRare(std::move(r));
}

void Endpoint::setRare(Rare r) {
  if (r.moreAddresses.empty() && r.hintZones.empty() && r.hintNodes.empty()) rare_.reset();
  else rare_ = std::make_shared<const Rare>(std::move(r));
}

bool operator==(const Service& a, const Service& b) {
  return a.meta == b.meta && a.type == b.type && a.externalName == b.externalName && a.clusterIPs == b.clusterIPs &&
         a.headless == b.headless && a.ports == b.ports && a.externalIPs == b.externalIPs &&
         a.loadBalancerSourceRanges == b.loadBalancerSourceRanges && a.sourceRangeUnreadable == b.sourceRangeUnreadable &&
         a.loadBalancerIngress == b.loadBalancerIngress &&
         a.externalTrafficPolicy == b.externalTrafficPolicy &&
         a.internalTrafficPolicy == b.internalTrafficPolicy &&
         a.sessionAffinity == b.sessionAffinity &&
         a.sessionAffinityTimeoutSeconds == b.sessionAffinityTimeoutSeconds &&
         a.healthCheckNodePort == b.healthCheckNodePort &&
         a.trafficDistribution == b.trafficDistribution;
}

bool operator==(const EndpointSlice& a, const EndpointSlice& b) {
  return a.meta == b.meta && a.serviceName == b.serviceName && a.addressType == b.addressType &&
         a.ports == b.ports && a.endpoints == b.endpoints;
}

bool operator==(const Node& a, const Node& b) {
  return a.meta == b.meta && a.podCIDRs == b.podCIDRs && a.addresses == b.addresses &&
         a.deletionTimestamp == b.deletionTimestamp && a.taintKeys == b.taintKeys;
}

bool operator==(const ServiceCIDR& a, const ServiceCIDR& b) { return a.meta == b.meta && a.cidrs == b.cidrs; }

}  // namespace kpn::api
