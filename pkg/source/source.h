// What the daemon's main loop needs from a cluster-state source (a manifest folder, the API
// server): start it, wait on its fd, let it apply what arrived to the ClusterState, and know
// whether the state is complete enough to be synced at all.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pkg/api/types.h"

namespace kpn::source {

// How one resource a source follows stands, for `status`.
struct ResourceState {
  std::string name;       // "Services", "EndpointSlices", ... or "folder"
  bool listed = false;    // complete at least once
  std::string lastError;  // "" while its last request succeeded
};

// A Service asked for by name outside the source's selector (pkg/services/proxied.h).
struct ExcludedLookup {
  bool asked = false;  // false: the source could not look (error says why)
  std::string error;
  std::optional<api::Service> service;  // the Service, when one by that name is labelled not ours
};

class Source {
 public:
  virtual ~Source() = default;
  // Starts watching; returns true if the state changed already.
  virtual bool start() = 0;
  // Readable when processEvents() has something to do.
  virtual int fd() const = 0;
  // Applies what arrived to the state; never blocks. Returns true if the state changed.
  virtual bool processEvents() = 0;
  // False until Services and EndpointSlices are complete (listed once): syncing a half-known
  // state would delete rules of services not seen yet. The Node and ServiceCIDRs only refine.
  virtual bool hasSynced() const = 0;
  // What has not listed yet, in words ("Nodes, ServiceCIDRs").
  virtual std::string pending() const { return ""; }
  // Services whose change carried a trigger time (EndpointSlice last-change-trigger-time), with
  // the earliest such time since the last call: the start of network-programming latency.
  virtual std::map<std::string, std::chrono::system_clock::time_point> takeTriggerTimes() { return {}; }
  virtual std::string describe() const = 0;
  // For `status`, on the main thread: each resource followed, listed or not, and its last error.
  virtual std::vector<ResourceState> resourceStates() const { return {}; }
  // For `trace`: the Service ns/name when the source leaves it out because it is labelled for
  // another proxy or as headless. Any thread; may block (the API source asks the server).
  virtual ExcludedLookup lookupExcluded(const std::string& ns, const std::string& name) const { return {}; }
};

}  // namespace kpn::source
