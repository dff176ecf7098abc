// What the daemon's main loop needs from a cluster-state source (a manifest folder, the API
// server): start it, wait on its fd, let it apply what arrived to the ClusterState, and know
// whether the state is complete enough to be synced at all.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace kpn::source {

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
};

}  // namespace kpn::source
