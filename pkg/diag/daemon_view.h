// The running daemon as its diagnosis socket shows it: its status, and the part of its cluster
// state a trace needs. Reads the daemon's parts by reference; every call on the sync loop's thread
// (through MainThreadCalls), except lookupExcluded, which may block and runs on the socket's.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "pkg/diag/daemon_status.h"
#include "pkg/diag/state_query.h"
#include "pkg/diag/sync_record.h"
#include "pkg/render/render.h"
#include "pkg/source/source.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/syncer.h"

namespace kpn::diag {

struct DaemonIdentity {
  std::string version, commit;
  std::string node;
  std::string configYaml;
  std::string sourceKind;  // "api" | "manifests"
  sync::WallTime startedAt = std::chrono::system_clock::now();
};

struct ExcludedLookupJson {
  std::optional<std::string> json;  // the Service, as Kubernetes JSON
  std::string error;                // the source could not be asked
};

class DaemonView {
 public:
  using EventCountsSource = std::function<std::optional<EventCounts>()>;
  DaemonView(DaemonIdentity id, const state::ClusterState& state, const source::Source& source,
             const sync::Syncer& syncer, const render::Renderer& renderer, const SyncRecord& record,
             EventCountsSource events)
      : id_(std::move(id)), state_(state), source_(source), syncer_(syncer), renderer_(renderer), record_(record),
        events_(std::move(events)) {}

  // Sync loop's thread.
  DaemonStatus status() const;
  // Sync loop's thread: what the state holds for a Service or Address question (the excluded
  // lookup aside: it may block).
  struct StateParts {
    std::string statusJson;
    std::vector<std::string> objects;  // Kubernetes JSON
    bool serviceFound = false;         // a Service question's Service is in the state
  };
  StateParts stateParts(const StateQuery& q) const;
  const DaemonIdentity& identity() const { return id_; }
  // Socket thread: the source's lookup of a Service outside its selector, as JSON.
  ExcludedLookupJson lookupExcluded(const std::string& ns, const std::string& name) const;

 private:
  DaemonIdentity id_;
  const state::ClusterState& state_;
  const source::Source& source_;
  const sync::Syncer& syncer_;
  const render::Renderer& renderer_;
  const SyncRecord& record_;
  EventCountsSource events_;
};

}  // namespace kpn::diag
