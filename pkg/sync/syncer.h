// One sync: take the store's change journal, plan through the one plan path (pkg/sync/planner.h:
// render, then plan against what is committed or what the kernel lists), commit it as one
// transaction (pkg/sync/kernel_steps.h). Owns the committed picture of our tables, keeps the
// journal's services pending until a commit lands, and decides when a sync must compare with
// the kernel. One service the kernel refuses does not hold up the others (pkg/sync/isolation.h),
// and only the families this kernel runs nftables for are programmed.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "nft/diff.h"
#include "nft/runner.h"
#include "pkg/render/render.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/isolation.h"
#include "pkg/sync/kernel_steps.h"
#include "pkg/sync/planner.h"

namespace kpn::sync {

struct SyncStats {
  bool ok = false;
  bool full = false;
  // How the plan was made (pkg/sync/planner.h).
  using Plan = PlanKind;
  Plan plan = Plan::None;
  size_t ops = 0;
  size_t bytes = 0;  // the transaction as sent (0 from runners that do not say)
  double renderMs = 0, diffMs = 0, commitMs = 0;
  double afterMs = 0;  // bookkeeping once the rules are committed
  size_t rejectedServices = 0;  // left out of this sync because the kernel refuses their rules
  bool transactionRejected = false;  // the kernel refused the first transaction as a whole
  size_t servicesRefusedNow = 0;     // services this sync's bisection found refused
};

// Failure counts since start (pkg/metrics counts the same from each SyncStats).
struct SyncFailureCounts {
  uint64_t rejectedTransactions = 0;  // commits the kernel refused as a whole
  uint64_t serviceRejections = 0;     // services found refused by bisection, counted per finding
};

// Told, on the sync loop's thread, what the kernel said about single services and about syncs
// that failed (Kubernetes Events and `status`, pkg/diag). The log lines stay the syncer's.
class SyncerListener {
 public:
  virtual ~SyncerListener() = default;
  virtual void serviceRefused(const std::string& service, const std::string& error) {}
  virtual void serviceProgrammedAgain(const std::string& service) {}
  virtual void syncFailed(const std::string& error) {}
};

class Syncer {
 public:
  Syncer(render::Renderer& renderer, nft::Runner& runner);

  // Takes st's change journal (its services stay pending here until a commit lands). The first sync reconciles with whatever our tables already
  // hold (keeping what matches); after a failure the next one is full.
  SyncStats sync(state::ClusterState& st);
  // Which families the kernel serves, asked now rather than by the first sync (each ask is a
  // checked transaction the kernel aborts: 15-31 ms each in the kernel here, under strace). Only
  // before the first sync, and not beside it.
  void probeFamilies() { kernel_.probeFamiliesOnce(); }
  // Renders and commits only the services with a new least-connection choice (the renderer's,
  // render/least_conn.h), leaving the journal to the next sync; nothing else of the cluster is
  // looked at. Not ok, and nothing done, unless the last sync left the kernel as committed: the
  // next sync then carries the choices.
  SyncStats syncChoices(state::ClusterState& st);

  bool nextIsFull() const { return mode_ != Mode::Incremental; }
  // After a successful incremental sync: the service keys it took from the change journal.
  // nullptr after any other sync (start-up, full, or a failure): every service may differ from
  // what a consumer saw before.
  const std::set<std::string>* lastChanges() const { return lastWasIncremental_ ? &lastChanges_ : nullptr; }
  // Work that must wait until our rules are committed and serving (removing another proxy's
  // leftovers): run after each successful commit until it returns true.
  void afterCommit(std::function<bool()> work) { afterCommit_ = std::move(work); }
  void setListener(SyncerListener* l) { listener_ = l ? l : &quiet_; }

  // How long until a refused service is due to be tried again: the loop should sync then. The
  // syncer keeps its retry times on std::chrono::steady_clock; the loop adds this to its own now.
  std::optional<std::chrono::nanoseconds> retryIn() const;
  // Service keys ("ns/name") currently left out because the kernel refuses their rules.
  std::set<std::string> rejectedServices() const;
  const SyncFailureCounts& failureCounts() const { return failures_; }
  // Someone else changed our tables (nft::TableMonitor): the next sync plans against a listing
  // of the kernel and changes only what differs from it (an intact table costs the listing and
  // no operation), not against what we believe is committed.
  void kernelChanged() {
    if (mode_ == Mode::Incremental) mode_ = Mode::Repair;
  }
  // How many syncs found the kernel fingerprint changed under us and went full.
  uint64_t fingerprintMismatches() const { return kernel_.fingerprintMismatches(); }
  // The families programmed (after the first sync: those the kernel runs nftables for).
  const std::set<nft::Family>& families() const { return kernel_.families(); }

 private:
  // Startup and Repair compare with a listing (reconcile), Full flushes and refills (after a
  // commit failed: what the kernel holds of ours is not known well enough to patch it).
  enum class Mode { Startup, Incremental, Repair, Full };
  std::optional<SyncStats> attempt(const state::ClusterState& st, bool choicesOnly);
  std::optional<PlanBase> planBase();
  SyncStats commit(PlannedSync& planned, SyncStats stats, bool choicesOnly);
  std::optional<nft::RunResult> commitWithoutRefused(PlannedSync& planned, SyncStats& stats,
                                                     std::set<std::string>& refused);
  void settle(const PlannedSync& planned, const nft::RunResult& r, const std::set<std::string>& refused,
              bool choicesOnly);

  render::Renderer& renderer_;
  KernelSteps kernel_;
  nft::Committed committed_;
  Mode mode_ = Mode::Startup;
  std::set<std::string> pending_;  // services taken from the journal that no commit has carried yet
  std::set<std::string> lastChanges_;
  bool lastWasIncremental_ = false;
  RetryBook rejected_;
  SyncFailureCounts failures_;
  std::function<bool()> afterCommit_;
  SyncerListener quiet_;
  SyncerListener* listener_ = &quiet_;
};

}  // namespace kpn::sync
