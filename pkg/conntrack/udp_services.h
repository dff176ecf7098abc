// The part of the cluster state the UDP conntrack cleanup reads: the proxied Services with a UDP
// port and their EndpointSlices. Kept on the sync thread from the services each sync changed and
// handed to the cleanup worker as an immutable snapshot (shared, copy on write): a sync that
// changed no UDP service hands over the same pointer, and the worker never touches the live state.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::conntrack {

struct UdpService {
  state::ServicePtr service;
  std::vector<state::SlicePtr> slices;
  bool operator==(const UdpService& o) const { return service == o.service && slices == o.slices; }
};
using UdpServices = std::map<std::string, UdpService>;  // by ns/name
using UdpSnapshot = std::shared_ptr<const UdpServices>;

// Whether the cleanup looks at this Service at all: proxied by us, with a UDP port.
bool hasUdpPort(const api::Service& svc, const services::NodeConfig& cfg);

class UdpServiceIndex {
 public:
  // changed: the service keys a sync covered; nullptr: every service may differ.
  void update(const state::ClusterState& st, const services::NodeConfig& cfg, const std::set<std::string>* changed);
  UdpSnapshot snapshot() const { return current_; }

 private:
  UdpSnapshot current_ = std::make_shared<const UdpServices>();
};

}  // namespace kpn::conntrack
