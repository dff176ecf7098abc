// Small builders for API objects, so tests read like the scenario they describe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pkg/api/types.h"
#include "pkg/state/cluster_state.h"

namespace kpn::testing {

inline api::ServicePort port(const std::string& name, int32_t p, api::Protocol proto = api::Protocol::TCP) {
  api::ServicePort sp;
  sp.name = name;
  sp.port = p;
  sp.protocol = proto;
  return sp;
}

inline std::shared_ptr<api::Service> service(const std::string& ns, const std::string& name,
                                             std::vector<std::string> clusterIPs, std::vector<api::ServicePort> ports) {
  auto s = std::make_shared<api::Service>();
  s->meta.ns = ns;
  s->meta.name = name;
  s->clusterIPs = std::move(clusterIPs);
  s->ports = std::move(ports);
  return s;
}

struct Ep {
  std::string ip;
  std::optional<bool> ready = std::nullopt, serving = std::nullopt, terminating = std::nullopt;
  std::string node = "";
};

inline std::shared_ptr<api::EndpointSlice> slice(const std::string& ns, const std::string& name, const std::string& svc,
                                                 std::vector<api::EndpointPort> ports, std::vector<Ep> eps,
                                                 const std::string& addressType = "IPv4") {
  auto s = std::make_shared<api::EndpointSlice>();
  s->meta.ns = ns;
  s->meta.name = name;
  s->meta.labels["kubernetes.io/service-name"] = svc;
  s->serviceName = svc;
  s->addressType = addressType;
  s->ports = std::move(ports);
  for (auto& e : eps) {
    api::Endpoint ep;
    ep.address = e.ip;
    ep.conditions.ready = e.ready;
    ep.conditions.serving = e.serving;
    ep.conditions.terminating = e.terminating;
    ep.nodeName = e.node;
    s->endpoints.push_back(ep);
  }
  return s;
}

inline api::EndpointPort epPort(const std::string& name, int32_t p, api::Protocol proto = api::Protocol::TCP) {
  api::EndpointPort ep;
  ep.name = name;
  ep.port = p;
  ep.protocol = proto;
  return ep;
}

}  // namespace kpn::testing
