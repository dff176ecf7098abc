// One sync: render the whole state, plan the difference from what is committed, commit it as one
// transaction. Owns the committed picture of our tables and decides when a sync must be full.
// One service the kernel refuses does not hold up the others (pkg/sync/isolation.h), and only
// the families this kernel runs nftables for are programmed.
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

namespace kpn::sync {

struct SyncStats {
  bool ok = false;
  bool full = false;
  // How the plan was made: from the change journal, or by comparing with the listed kernel
  // tables (at start-up, keeping what matches; after a failure or a declaration change, rebuilt).
  enum class Plan { None, Incremental, Reconcile, Full } plan = Plan::None;
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

  // Consumes st's change journal. The first sync reconciles with whatever our tables already
  // hold (keeping what matches); after a failure the next one is full.
  SyncStats sync(state::ClusterState& st);
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
  uint64_t fingerprintMismatches() const { return fingerprintMismatches_; }
  // The families programmed (after the first sync: those the kernel runs nftables for).
  const std::set<nft::Family>& families() const { return families_; }

 private:
  // Startup and Repair compare with a listing (reconcile), Full flushes and refills (after a
  // commit failed: what the kernel holds of ours is not known well enough to patch it).
  enum class Mode { Startup, Incremental, Repair, Full };
  bool listKernel(std::vector<nft::ListedTable>& out);
  // The kernel's tables, aligned with the skeleton's, with the start-up declarations in place:
  // declared only when the listing lacks them (declaring what exists is still a commit, whose
  // events would look like outside damage to a monitor that cannot tell it is ours).
  bool listDeclared(std::vector<nft::ListedTable>& out);
  void probeFamilies();
  std::vector<nft::TableId> ourTables() const;
  void takeFingerprint(std::optional<uint32_t> generation);
  SyncStats renderAndCommit(state::ClusterState& st, std::set<std::string>& changed,
                            const std::vector<nft::ListedTable>& kernel, bool choicesOnly);
  bool fingerprintDiffers();
  nft::Plan plan(const nft::Ruleset& desired, const std::vector<nft::ListedTable>& kernel,
                 const std::set<std::string>* onlyOwners, SyncStats::Plan* how = nullptr) const;
  render::Renderer& renderer_;
  nft::Runner& runner_;
  nft::Committed committed_;
  Mode mode_ = Mode::Startup;
  std::set<std::string> lastChanges_;
  bool lastWasIncremental_ = false;
  bool familiesProbed_ = false;
  std::set<nft::Family> families_;  // supported
  std::optional<nft::KernelFingerprint> fingerprint_;  // after our last commit
  uint64_t fingerprintMismatches_ = 0;
  RetryBook rejected_;
  SyncFailureCounts failures_;
  std::function<bool()> afterCommit_;
  SyncerListener quiet_;
  SyncerListener* listener_ = &quiet_;
};

}  // namespace kpn::sync
