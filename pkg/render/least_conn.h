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
#include "pkg/services/least_conn_ports.h"

namespace kpn::render {

// The counter's slots (services::kLeastConnSlots) are the counts the shared pick rules have.
static_assert(services::kLeastConnSlots == kPooledCounts, "a least-connection tie fills the pooled counts");

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
