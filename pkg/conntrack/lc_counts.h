// Least connection's counts, as IPVS keeps them (ip_vs_dest_conn_overhead): per least-connection
// service port (services/least_conn_ports.h), this node's conntrack entries whose original destination
// is one of the port's frontends (a ClusterIP, LoadBalancer or external IP with the port, or the
// NodePort on any address) and whose reply comes from one of its endpoints (the entry was DNATed
// there): active while TCP or SCTP is ESTABLISHED, inactive in every other state and for UDP. And
// the choice they make for each endpoint set: the endpoints with the least overhead
// active x 256 + inactive, all of them when they tie (at most services::kLeastConnSlots, a random
// sample of a larger tie, kept while it stays a tie).
//
// A burst: the slots are what the packet path picks from until the next choice lands (a few
// milliseconds), and a tie of one endpoint would take every connection of a burst. So a port that
// saw K new entries in the last `burstWindow` (the connections expected before the next choice
// lands) names what IPVS would do with its next K connections: rounds of the least-loaded
// endpoints, each round adding one connection's weight (256 for TCP and SCTP, 1 for UDP) to each
// endpoint of it, until K slots are named; an endpoint named n times gets n of the random picks.
// With one new entry at a time (K = 1) that is the tie itself: IPVS's choice, exactly.
//
// Pure bookkeeping over Flow values: the kernel side (events, dumps) is lc_events.h, the thread
// lc_tracker.h. Entries are known by their conntrack id, so an update or a destroy finds what the
// entry counted for.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "pkg/conntrack/flow.h"
#include "pkg/services/least_conn_ports.h"

namespace kpn::conntrack {

// One set's new choice: the endpoint values its slots should name.
struct LeastConnChoice {
  std::string serviceKey, owner;
  std::vector<std::string> values;
};

// One endpoint's counts, for the per-endpoint gauges.
struct EndpointConnections {
  std::string serviceKey, portName, endpoint;  // endpoint: "10.0.0.1:8080", "[fd00::1]:8080"
  uint32_t active = 0, inactive = 0;
};

// True for a conntrack state (Flow::state) that IPVS counts as active: TCP and SCTP ESTABLISHED.
bool countsAsActive(const Flow& f);

class LeastConnCounter {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // burstWindow: about the time a choice takes to land (the loop's choiceGap and a commit).
  explicit LeastConnCounter(std::chrono::milliseconds burstWindow = std::chrono::milliseconds(30))
      : burstWindow_(burstWindow) {}

  // The ports to count, as the renderer reports them. Entries of endpoints that stay keep
  // counting; the others are forgotten. Every set's choice is made again.
  void setPorts(const std::map<std::string, std::vector<services::LeastConnPort>>& ports);
  size_t ports() const { return ports_.size(); }

  // A new entry or a change of one (NEW and UPDATE events, the same call: an event may be the first
  // this side hears of an entry) and its end. Entries of no least-connection port are ignored.
  // `now`: when it was seen (an entry first seen counts as an arrival: see the burst above).
  void update(const Flow& f, Time now = {});
  void destroy(uint32_t id);
  // A dump replaces everything: begin, each entry, end. Events that arrive after it was taken are
  // applied after it (an update of an entry it had, a destroy of one it had not: both harmless).
  void beginResync();
  void resyncEntry(const Flow& f) { update(f, Time{}); }  // not an arrival
  void endResync() {}
  size_t entries() const { return flows_.size(); }

  // The sets whose choice changed since the last call, with the new choice. A tie larger than the
  // slots is sampled with `rng`. `now` ages the arrivals.
  std::vector<LeastConnChoice> takeChoices(std::mt19937& rng, Time now = {});
  // When the oldest arrival leaves the burst window (the choices are due again then); max: never.
  Time nextExpiry() const;
  // Every endpoint's counts (for the gauges).
  std::vector<EndpointConnections> endpointConnections() const;

  // The frontends of every port, for the kernel's event filter: addresses (binary, with their
  // family) and whether some port has a NodePort (then any address can be a frontend).
  struct FrontendAddress {
    uint8_t family;
    Ip ip;
  };
  std::vector<FrontendAddress> frontendAddresses() const;
  bool anyNodePort(uint8_t family) const;
  std::vector<uint8_t> protocols(uint8_t family) const;  // IPPROTO_* of the ports

 private:
  struct Frontend {  // family, protocol, address (zero for a NodePort), port
    uint8_t family, proto;
    IpPort where;
    bool operator==(const Frontend& o) const { return family == o.family && proto == o.proto && where == o.where; }
  };
  struct FrontendHash {
    size_t operator()(const Frontend& k) const { return IpPortHash()(k.where) ^ (size_t(k.family) << 8 | k.proto); }
  };
  struct Endpoint {
    IpPort at;
    std::string value, text;
    uint32_t active = 0, inactive = 0;
  };
  struct Set {
    std::string owner;
    std::vector<size_t> endpoints;    // into Port::endpoints
    std::vector<std::string> chosen;  // the last choice handed out
  };
  struct Port {
    services::LeastConnPort spec;
    uint8_t family = 0, proto = 0;
    std::vector<Endpoint> endpoints;
    std::unordered_map<IpPort, size_t, IpPortHash> byEndpoint;
    std::vector<Set> sets;
    std::deque<Time> arrivals;  // entries first seen in the burst window
    bool dirty = true;  // counts changed since the last choice
  };
  struct Counted {  // what an entry counts for
    uint32_t port, endpoint;
    bool active;
  };
  void count(const Counted& c, int delta);
  std::vector<std::string> choose(const Port& p, const Set& s, size_t want, std::mt19937& rng) const;

  std::chrono::milliseconds burstWindow_;
  std::vector<Port> ports_;
  std::unordered_map<Frontend, uint32_t, FrontendHash> byFrontend_;
  std::unordered_map<uint32_t, Counted> flows_;  // conntrack id -> what it counts for
};

}  // namespace kpn::conntrack
