// The addresses a Service answers on at this node, each one a packet to trace: its ClusterIPs,
// external IPs and LoadBalancer IPs with each service port, the node's NodePort addresses with
// each nodePort; for a headless Service the endpoints its DNS name returns, for an ExternalName
// the address it aliases when that is an IP. Pure: the caller gives the NodePort addresses (the
// render environment's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pkg/api/types.h"
#include "pkg/trace/request.h"

namespace kpn::trace {

struct ServiceFrontend {
  std::string kind;  // "ClusterIP", "externalIP", "LoadBalancer", "NodePort", "endpoint", "externalName"
  std::string address;
  uint16_t port = 0;
  std::string protocol;  // tcp | udp | sctp
  std::string portName;  // the service port's name, or its number when unnamed
};

// `target.port` picks service ports by name or number ("" all), `protocol` by protocol ("" all).
// With target.dnsName only what the name resolves to: ClusterIPs (a headless Service: its ready
// endpoints), with the port number given. `nodePortAddresses`: where NodePorts answer here.
std::vector<ServiceFrontend> serviceFrontends(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                                              const ServiceTarget& target, const std::string& protocol,
                                              const std::vector<std::string>& nodePortAddresses);

}  // namespace kpn::trace
