// The cluster state a sync renders: every Service, every EndpointSlice grouped by the Service it
// belongs to, this node, and the cluster's ServiceCIDRs. Sources (manifest folder, API watch) keep it up to date; the syncer
// reads it. Objects are shared immutable values: an unchanged object keeps its pointer, which is
// what lets the renderer reuse the previous result for an untouched service.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "pkg/api/types.h"

namespace kpn::state {

using ServicePtr = std::shared_ptr<const api::Service>;
using SlicePtr = std::shared_ptr<const api::EndpointSlice>;
using NodePtr = std::shared_ptr<const api::Node>;
using ServiceCIDRPtr = std::shared_ptr<const api::ServiceCIDR>;

// "namespace/name"
std::string serviceKey(const std::string& ns, const std::string& name);

struct ClusterState {
  std::map<std::string, ServicePtr> services;                             // by ns/name
  std::map<std::string, std::map<std::string, SlicePtr>> slicesByService;  // ns/service -> slice name -> slice
  NodePtr node;                                                            // may be null
  std::map<std::string, ServiceCIDRPtr> serviceCIDRs;                     // by name (cluster-scoped)

  // Services (ns/name) whose Service object or any of whose slices changed since the syncer last
  // took the journal. A key may name a service that no longer exists (it was deleted).
  std::set<std::string> changedServices;
  bool nodeChanged = false;
  bool serviceCIDRsChanged = false;

  // The change journal as a value: what changed since the last take.
  struct Changes {
    std::set<std::string> services;
    bool node = false;
    bool serviceCIDRs = false;
  };
  // Hands the journal out and starts an empty one. The taker keeps what it could not use yet
  // (the syncer, until a commit lands); nothing is given back.
  Changes takeChanges();

  // Upstream's change trackers, for metrics: the services with a Service (or EndpointSlice)
  // change not yet taken by a sync, and the count of every such change applied.
  struct ChangeCounts {
    std::set<std::string> pendingServices, pendingEndpoints;
    uint64_t serviceChanges = 0, endpointChanges = 0;
  } changeCounts;

  // Mutators keep the change journal honest; sources use only these. Each returns whether the
  // state changed (an equal value or a missing key changes nothing).
  bool upsertService(ServicePtr svc);
  bool deleteService(const std::string& ns, const std::string& name);
  bool upsertSlice(SlicePtr slice);  // slice->serviceName must be set
  bool deleteSlice(const std::string& ns, const std::string& serviceName, const std::string& sliceName);
  bool setNode(NodePtr node);
  bool upsertServiceCIDR(ServiceCIDRPtr cidr);
  bool deleteServiceCIDR(const std::string& name);

 private:
  void serviceChanged(const std::string& key);
  void endpointsChanged(const std::string& key);
};

}  // namespace kpn::state
