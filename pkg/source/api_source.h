// The Kubernetes API server as the cluster-state source: three reflectors (Services and
// EndpointSlices with upstream kube-proxy's label selector, and this node's Node) on their own
// threads hand decoded deltas to a queue; the main thread applies them to the ClusterState in
// processEvents(), so the state, the renderer and the syncer stay single-threaded. A fourth
// reflector follows the cluster's ServiceCIDRs where the API server serves them (a 404 counts as
// none). hasSynced() turns true once Services and EndpointSlices have listed, as upstream's first
// sync waits for those two only: the Node and ServiceCIDRs refine the ruleset when they arrive (a
// 403 on them, custom RBAC, must not keep every service unprogrammed), with a warning meanwhile.
#pragma once

#include <array>
#include <optional>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pkg/kube/reflector.h"
#include "pkg/kube/transport.h"
#include "pkg/services/proxied.h"
#include "pkg/source/source.h"
#include "pkg/source/unique_fd.h"
#include "pkg/state/cluster_state.h"

namespace kpn::source {

class ApiSource final : public Source {
 public:
  ApiSource(std::unique_ptr<kube::Transport> transport, std::string nodeName, state::ClusterState& state,
            kube::ReflectorOptions opts = {});
  ~ApiSource() override;  // stops the reflectors and joins their threads
  ApiSource(const ApiSource&) = delete;
  ApiSource& operator=(const ApiSource&) = delete;

  bool start() override;
  int fd() const override { return wake_.get(); }
  bool processEvents() override;
  bool hasSynced() const override;
  std::map<std::string, std::chrono::system_clock::time_point> takeTriggerTimes() override;
  std::string describe() const override;

  // The resources that have not listed yet ("Services, Nodes"), the optional ones included.
  std::string pending() const override;
  // Objects skipped as invalid, over all reflectors (a metric).
  uint64_t skippedObjects() const;
  std::vector<ResourceState> resourceStates() const override;
  // GET of the one Service by field selector, without the proxy label selector.
  ExcludedLookup lookupExcluded(const std::string& ns, const std::string& name) const override;
  // The API server connection, for the event recorder (it outlives the recorder).
  kube::Transport& transport() { return *transport_; }

 private:
  enum Resource { kServices, kSlices, kNode, kServiceCIDRs, kResources };
  struct Batch {
    Resource resource;
    std::vector<kube::Delta> deltas;
    bool listed;
  };
  void enqueue(Resource r, std::vector<kube::Delta>&& deltas, bool listed);
  bool apply(Resource r, kube::Delta& d);

  std::unique_ptr<kube::Transport> transport_;
  const std::string nodeName_;
  state::ClusterState& state_;
  std::array<std::unique_ptr<kube::Reflector>, kResources> reflectors_;
  std::vector<std::thread> threads_;
  UniqueFd wake_;  // eventfd: the reflectors' "something queued"

  std::mutex mu_;  // guards queue_
  std::vector<Batch> queue_;

  // Main-thread state.
  std::array<bool, kResources> listed_{};
  // When Services and EndpointSlices had both listed. The first sync waits a little longer for
  // the Node and ServiceCIDRs (they usually list within milliseconds, and a sync without them
  // renders NodePorts and local detection differently, so a restart would churn rules twice),
  // but never more than kRefinementGrace: a 403 on either must not keep the node unprogrammed.
  std::optional<std::chrono::steady_clock::time_point> requiredListedAt_;
  static constexpr std::chrono::seconds kRefinementGrace{2};
  mutable bool refinementWarned_ = false;
  std::unordered_map<std::string, std::string> sliceService_;  // "ns/slice" -> service name it was filed under
  std::map<std::string, std::chrono::system_clock::time_point> triggers_;
  // Trigger times up to this are ignored (see apply()).
  const std::chrono::system_clock::time_point startedAt_ = std::chrono::system_clock::now();
};

// Parses an RFC 3339 time ("2026-12-03T06:50:01Z", fractions and offsets allowed).
std::optional<std::chrono::system_clock::time_point> parseRfc3339(const std::string& s);

}  // namespace kpn::source
