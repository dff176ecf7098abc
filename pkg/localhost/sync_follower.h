// Follows the sync loop for NodePorts on loopback: after each successful sync that changed
// services (or while a listener could not be opened: each sync tries again, as upstream), the
// listeners of every served family with localhost NodePorts become what the state asks for
// (render::localhostNodePorts), and the metrics say how many are open and how many failed.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "nft/expr.h"
#include "pkg/localhost/proxy.h"
#include "pkg/metrics/localhost_nodeports.h"
#include "pkg/render/render.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/loop.h"

namespace kpn::localhost {

class SyncFollower : public sync::SyncObserver {
 public:
  using ServedFamilies = std::function<std::set<nft::Family>()>;
  SyncFollower(const state::ClusterState& state, const services::NodeConfig& cfg, const render::Renderer& renderer,
               ServedFamilies served, Proxy& proxy, metrics::LocalhostNodePortMetrics& metrics)
      : state_(state), cfg_(cfg), renderer_(renderer), served_(std::move(served)), proxy_(proxy), metrics_(metrics) {}

  void synced(const sync::SyncReport& r) override;

 private:
  const state::ClusterState& state_;
  const services::NodeConfig& cfg_;
  const render::Renderer& renderer_;
  ServedFamilies served_;
  Proxy& proxy_;
  metrics::LocalhostNodePortMetrics& metrics_;
  bool synced_ = false, retry_ = false;
  std::string zones_;  // the zones the last listeners were chosen with (topology hints)
};

}  // namespace kpn::localhost
