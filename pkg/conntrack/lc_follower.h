// The sync loop's side of least connection: after each sync whose render changed the
// least-connection ports, hands them to the tracker (lc_tracker.h); when the tracker has new
// choices, gives them to the renderer and has the loop sync those services (sync::ChoiceSource);
// once they are committed, reports how long they took from the conntrack events that made them to
// the kernel (the decision-to-kernel latency).
#pragma once

#include <chrono>
#include <functional>

#include "pkg/conntrack/lc_tracker.h"
#include "pkg/services/least_conn_ports.h"
#include "pkg/sync/loop.h"

namespace kpn::conntrack {

class LeastConnFollower : public sync::SyncObserver, public sync::ChoiceSource {
 public:
  // choices: how many new choices the commit carried; seconds: since the oldest was made.
  using Landed = std::function<void(size_t choices, double seconds)>;
  // Every endpoint's counts, about once a second (per-endpoint gauges).
  using Counts = std::function<void(const std::vector<EndpointConnections>&)>;
  LeastConnFollower(services::LeastConnTarget& renderer, LeastConnTracker& tracker, Landed landed = nullptr,
                    Counts counts = nullptr)
      : renderer_(renderer), tracker_(tracker), landed_(std::move(landed)), counts_(std::move(counts)) {}

  void synced(const sync::SyncReport& r) override;
  void tick(sync::SteadyTime now) override;
  int fd() const override { return tracker_.fd(); }
  bool take() override;
  void landed(const sync::SyncStats& s) override;

 private:
  services::LeastConnTarget& renderer_;
  LeastConnTracker& tracker_;
  Landed landed_;
  Counts counts_;
  sync::SteadyTime countsAt_{};
  uint64_t version_ = 0;
  bool handed_ = false;
  size_t waiting_ = 0;  // choices given to the renderer, not yet committed
  std::chrono::steady_clock::time_point since_{};
};

}  // namespace kpn::conntrack
