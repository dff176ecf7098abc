// The daemon's diagnosis side, wired in one place so that main() only creates it: the sync record
// and the Kubernetes Events (both hear the syncer), the status socket answering `status` and
// `trace` on the sync loop's thread, and the hooks that turn server bind failures into events.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "pkg/config/command_line.h"
#include "pkg/diag/daemon_view.h"
#include "pkg/diag/local_socket.h"
#include "pkg/diag/main_thread_calls.h"
#include "pkg/diag/socket_answers.h"
#include "pkg/diag/sync_record.h"
#include "pkg/events/recorder.h"
#include "pkg/events/service_events.h"
#include "pkg/health/service_health.h"
#include "pkg/http/retrying_server.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/sync/loop.h"
#include "pkg/sync/syncer_listeners.h"

namespace kpn::cmd {

struct DiagnosisParts {
  const config::Loaded& conf;
  std::string nodeName;
  source::Source& source;
  const state::ClusterState& state;
  sync::Syncer& syncer;
  const render::Renderer& renderer;
  metrics::ProxyMetrics& metrics;
};

class Diagnosis {
 public:
  explicit Diagnosis(DiagnosisParts p);
  ~Diagnosis();  // the socket first (its thread waits on the loop), then the events
  Diagnosis(const Diagnosis&) = delete;
  Diagnosis& operator=(const Diagnosis&) = delete;

  // Adds the sync record and the main-thread calls to the loop's observers.
  void observe(sync::SyncLoop& loop);
  // runSyncLoop's wake fd.
  int wakeFd() const { return calls_.fd(); }

  // Kubernetes Events (nothing without an API source).
  void record(const events::Event& e);
  bool flushEvents(std::chrono::milliseconds limit);
  health::BindFailureHook healthCheckBindFailure();
  http::BindFailureHook serverBindFailure();

 private:
  std::string node_;
  diag::SyncRecord record_;
  std::unique_ptr<events::Recorder> recorder_;
  std::unique_ptr<events::ServiceEvents> serviceEvents_;
  sync::SyncerListeners listeners_;
  diag::MainThreadCalls calls_;
  std::unique_ptr<diag::DaemonView> view_;
  std::unique_ptr<diag::SocketAnswers> answers_;
  std::unique_ptr<diag::LocalSocketServer> socket_;
  sync::Syncer& syncer_;
};

}  // namespace kpn::cmd
