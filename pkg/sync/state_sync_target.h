// The daemon's SyncTarget: re-read the host's addresses (at most once a second), then sync the
// cluster state through the Syncer.
#pragma once

#include <functional>

#include "pkg/net/ip.h"
#include "pkg/render/render.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/clock.h"
#include "pkg/sync/loop.h"
#include "pkg/sync/syncer.h"

namespace kpn::sync {

class StateSyncTarget : public SyncTarget {
 public:
  using AddressReader = std::function<net::HostAddresses()>;
  StateSyncTarget(const Clock& clock, state::ClusterState& state, render::Renderer& renderer, Syncer& syncer,
                  AddressReader readAddresses)
      : clock_(clock), state_(state), renderer_(renderer), syncer_(syncer), readAddresses_(std::move(readAddresses)) {}

  SyncStats sync() override {
    // Addresses come and go without a manifest change: re-read them (getifaddrs and the route
    // tables, which can be long on a node with a route per pod) at most once a second.
    SteadyTime now = clock_.now();
    if (readAddresses_ && (!readOnce_ || now - lastAddressRead_ >= std::chrono::seconds(1))) {
      renderer_.setHostAddresses(readAddresses_());
      lastAddressRead_ = now;
      readOnce_ = true;
    }
    // Taken by this sync, as upstream's trackers are (a failed sync retries them as a full one).
    state_.changeCounts.pendingServices.clear();
    state_.changeCounts.pendingEndpoints.clear();
    return syncer_.sync(state_);
  }
  SyncStats syncChoices() override { return syncer_.syncChoices(state_); }
  const std::set<std::string>* lastChanges() const override { return syncer_.lastChanges(); }
  std::optional<std::chrono::nanoseconds> retryIn() const override { return syncer_.retryIn(); }
  void kernelChanged() override { syncer_.kernelChanged(); }

 private:
  const Clock& clock_;
  state::ClusterState& state_;
  render::Renderer& renderer_;
  Syncer& syncer_;
  AddressReader readAddresses_;
  SteadyTime lastAddressRead_{};
  bool readOnce_ = false;
};

}  // namespace kpn::sync
