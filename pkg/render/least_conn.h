// Least connection (scheduler.h, docs/schedulers.md): IPVS's lc. Rules cannot count connections,
// but this node's conntrack can (pkg/conntrack/lc_tracker.h): the daemon chooses, for each endpoint
// set of an lc service port, the endpoints with the least overhead (active x 256 + inactive), and
// the destination's slots in its backends map name exactly those, so that the shared pick rules
// (pick_chains.h: `numgen random mod k` over the k slots) spread new connections over the tie at
// random (in a burst, the shares of the next connections: pkg/conntrack/lc_counts.h). The choice
// is an input of the render, like the slot orders: a new choice re-renders that
// one service and changes only its slot elements, never a rule or a chain; until the next choice
// lands the packet path keeps the last one, so a new connection never waits for the daemon.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/api/types.h"
#include "pkg/render/backend_order.h"
#include "pkg/render/pick_chains.h"

namespace kpn::render {

// At most this many slots: the counts the shared pick rules have. A tie among more endpoints is
// written as a random sample of it (the counter draws it).
inline constexpr size_t kLeastConnSlots = kPooledCounts;

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

// The current choices: service -> owner -> the values the slots name.
class LeastConnChoices {
 public:
  // True when it differs from what the owner had (the service needs a render).
  bool set(const std::string& serviceKey, const std::string& owner, std::vector<std::string> values);
  const std::vector<std::string>* find(const std::string& serviceKey, const std::string& owner) const;
  void erase(const std::string& serviceKey) { choices_.erase(serviceKey); }
  bool operator==(const LeastConnChoices& o) const { return choices_ == o.choices_; }

 private:
  std::map<std::string, std::map<std::string, std::vector<std::string>>> choices_;
};

// The slots of a least-connection destination: the chosen values that are in `order`, in its
// order, each as many times as the choice names it (a burst's shares); without a choice that
// names one of them (a new service, or before the first counts), the first kLeastConnSlots of the
// order.
std::vector<std::string> leastConnSlots(const EndpointOrder& order, const std::vector<std::string>* chosen);

}  // namespace kpn::render
