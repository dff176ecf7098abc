#include "pkg/trace/frontends.h"

#include <set>

#include "pkg/net/ip.h"

namespace kpn::trace {

namespace {

std::string portLabel(const api::ServicePort& p) { return p.name.empty() ? std::to_string(p.port) : p.name; }

bool portWanted(const api::ServicePort& p, const ServiceTarget& t, const std::string& protocol) {
  if (!protocol.empty() && protocol != api::protocolName(p.protocol)) return false;
  if (t.port.empty()) return true;
  return t.port == p.name || t.port == std::to_string(p.port);
}

// A headless Service's DNS answer: the ready endpoints' addresses (what CoreDNS returns), with the
// slice port that carries the service port's name.
void headlessFrontends(const api::ServicePort& sp, const std::vector<const api::EndpointSlice*>& slices,
                       uint16_t askedPort, std::vector<ServiceFrontend>& out) {
  std::set<std::string> seen;
  for (const auto* s : slices)
    for (const auto& ep : s->endpoints) {
      if (!ep.conditions.isReady()) continue;
      int32_t port = askedPort;
      for (const auto& p : s->ports)
        if (p.name == sp.name && p.protocol == sp.protocol && p.port) port = askedPort ? askedPort : *p.port;
      for (const auto& a : ep.addresses())
        if (seen.insert(a).second)
          out.push_back({"endpoint", a, static_cast<uint16_t>(port), api::protocolName(sp.protocol), portLabel(sp)});
    }
}

}  // namespace

std::vector<ServiceFrontend> serviceFrontends(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                                              const ServiceTarget& target, const std::string& protocol,
                                              const std::vector<std::string>& nodePortAddresses) {
  std::vector<ServiceFrontend> out;
  // A DNS name's port is the port the client dials: the service port of that number.
  ServiceTarget t = target;
  const uint16_t asked = target.dnsName ? static_cast<uint16_t>(std::stoi(target.port)) : 0;
  if (svc.type == "ExternalName") {
    if (auto ip = net::canonicalIp(svc.externalName)) {
      if (asked) out.push_back({"externalName", *ip, asked, protocol.empty() ? "tcp" : protocol, target.port});
      for (const auto& p : svc.ports)
        if (!asked && portWanted(p, t, protocol))
          out.push_back({"externalName", *ip, static_cast<uint16_t>(p.port), api::protocolName(p.protocol), portLabel(p)});
    }
    return out;
  }
  // A Service has rules only in the families of its ClusterIPs (as upstream's): an external
  // address or a NodePort address of another family answers nothing of it.
  std::set<net::Family> families;
  for (const auto& ip : svc.clusterIPs)
    if (auto f = net::familyOf(ip)) families.insert(*f);
  auto served = [&](const std::string& ip) {
    auto f = net::familyOf(ip);
    return f && families.count(*f);
  };
  for (const auto& p : svc.ports) {
    bool wanted = target.dnsName ? (p.port == asked && (protocol.empty() || protocol == api::protocolName(p.protocol)))
                                 : portWanted(p, t, protocol);
    if (svc.headless) {
      // DNS gives addresses only: the port a client dials need not be a service port.
      bool protoOk = protocol.empty() || protocol == api::protocolName(p.protocol);
      if (target.dnsName ? protoOk : portWanted(p, t, protocol)) headlessFrontends(p, slices, asked, out);
      if (target.dnsName && protoOk) break;  // one answer per name
      continue;
    }
    if (!wanted) continue;
    const std::string proto = api::protocolName(p.protocol);
    const uint16_t port = static_cast<uint16_t>(p.port);
    for (const auto& ip : svc.clusterIPs) out.push_back({"ClusterIP", ip, port, proto, portLabel(p)});
    if (target.dnsName) continue;
    for (const auto& ip : svc.externalIPs)
      if (served(ip)) out.push_back({"externalIP", ip, port, proto, portLabel(p)});
    for (const auto& in : svc.loadBalancerIngress)
      if (!in.ip.empty() && served(in.ip)) out.push_back({"LoadBalancer", in.ip, port, proto, portLabel(p)});
    if (p.nodePort && (svc.type == "NodePort" || svc.type == "LoadBalancer"))
      for (const auto& ip : nodePortAddresses)
        if (served(ip)) out.push_back({"NodePort", ip, static_cast<uint16_t>(p.nodePort), proto, portLabel(p)});
  }
  return out;
}

}  // namespace kpn::trace
