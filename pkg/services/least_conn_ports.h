// Least connection between the renderer and the counter (docs/schedulers.md): what the renderer
// reports of each least-connection service port (render/least_conn.h), what the counter
// (pkg/conntrack/lc_counts.h) counts from it, and where its choices go back. The counter sees the
// renderer only through LeastConnTarget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nft/expr.h"
#include "pkg/api/types.h"

namespace kpn::services {

// At most this many slots: the counts the shared pick rules have (render asserts it). A tie among more endpoints is
// written as a random sample of it (the counter draws it).
inline constexpr size_t kLeastConnSlots = 16;

struct LeastConnEndpoint {
  std::string ip;  // canonical text
  int32_t port = 0;
  std::string value;  // the element value JSON ("ip . port"), as the slots and choices name it
  bool operator==(const LeastConnEndpoint& o) const { return ip == o.ip && port == o.port && value == o.value; }
};

// An endpoint set that chooses (BackendOrders' owner: "ip all/tcp/http", "ip6 local/udp/53"):
// its endpoints' values.
struct LeastConnSet {
  std::string owner;
  std::vector<std::string> values;
  bool operator==(const LeastConnSet& o) const { return owner == o.owner && values == o.values; }
};

// What the counter needs of one least-connection service port in one family: the frontends its
// connections come in by, the endpoints they may reach, and the endpoint sets that choose.
struct LeastConnPort {
  std::string serviceKey;  // ns/name
  std::string portName;    // the port's name, or its number
  nft::Family family = nft::Family::IPv4;
  api::Protocol protocol = api::Protocol::TCP;
  int32_t port = 0;                       // the service port
  std::vector<std::string> frontendIps;   // ClusterIP, LoadBalancer and external IPs this service holds
  std::optional<int32_t> nodePort;        // held by this service
  std::vector<LeastConnEndpoint> endpoints;  // every endpoint of its sets, once
  std::vector<LeastConnSet> sets;            // sets of two or more endpoints
  bool operator==(const LeastConnPort& o) const {
    return serviceKey == o.serviceKey && portName == o.portName && family == o.family && protocol == o.protocol &&
           port == o.port && frontendIps == o.frontendIps && nodePort == o.nodePort && endpoints == o.endpoints &&
           sets == o.sets;
  }
};

// The renderer, as the least-connection counter's follower (pkg/conntrack/lc_follower.h) sees it.
class LeastConnTarget {
 public:
  virtual ~LeastConnTarget() = default;
  // The endpoints an endpoint set's slots name from now on. True when that differs from before:
  // the service is rendered again by the next render, changed or not.
  virtual bool choose(const std::string& serviceKey, const std::string& owner, std::vector<std::string> values) = 0;
  // The least-connection ports of the last render, by service, and a number that grows whenever
  // they change.
  virtual const std::map<std::string, std::vector<LeastConnPort>>& leastConnPorts() const = 0;
  virtual uint64_t leastConnVersion() const = 0;
};

}  // namespace kpn::services
