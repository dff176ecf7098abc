// The daemon's sync loop: when to sync (coalescing changes for --min-sync-period, a forced sync
// every --sync-period, backoff after failures up to the sync period), nothing before the source
// has listed everything, and who hears about each sync (health-check ports, /healthz, metrics).
// Time comes from a Clock and the blocking wait is a separate driver (runSyncLoop), so the
// decisions are unit-tested with a fake clock.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nft/kernel/table_monitor.h"
#include "pkg/source/source.h"
#include "pkg/sync/clock.h"
#include "pkg/sync/syncer.h"

namespace kpn::sync {

// One sync of the current state, whatever that involves (the daemon's: re-read host addresses,
// render, diff, commit). The loop only decides when.
class SyncTarget {
 public:
  virtual ~SyncTarget() = default;
  virtual SyncStats sync() = 0;
  // After a successful sync: the service keys it covered; nullptr: every service may differ.
  virtual const std::set<std::string>* lastChanges() const = 0;
  // Parts left out of the last sync that want another try after this long (services the kernel
  // refused: pkg/sync/isolation.h); the loop syncs then even when nothing changed.
  virtual std::optional<std::chrono::nanoseconds> retryIn() const { return std::nullopt; }
  // Someone else changed our tables: the next sync must compare with the kernel, not with what
  // we believe is committed.
  virtual void kernelChanged() {}
  // Render and commit only what a ChoiceSource asked for (below); not ok: leave it to sync().
  virtual SyncStats syncChoices() { return {}; }
};

// Something outside the cluster's changes that wants services rendered again soon: least
// connection's choices (pkg/conntrack/lc_follower.h). runSyncLoop polls fd() and calls take();
// when it says yes, the loop syncs the choices (SyncTarget::syncChoices) at most every
// LoopTimings::choiceGap, not held back by --min-sync-period, and tells no observer (nothing in the
// cluster changed). A regular sync that comes first carries them.
class ChoiceSource {
 public:
  virtual ~ChoiceSource() = default;
  virtual int fd() const = 0;
  virtual bool take() = 0;  // reads what is ready; true: a render is wanted
  // The sync that carried them (a choices sync or a regular one) is done.
  virtual void landed(const SyncStats&) {}
};

// What one sync did, for observers. Valid during the callback only.
struct SyncReport {
  SyncStats stats;
  const std::set<std::string>* changed = nullptr;  // see SyncTarget::lastChanges; null after a failure
  // On success: services whose change carried a trigger time (EndpointSlice
  // last-change-trigger-time), earliest time each. Empty after a failure (kept for the retry).
  std::map<std::string, WallTime> triggerTimes;
  std::chrono::nanoseconds duration{0};  // the whole sync, as the clock saw it
  WallTime finished;                     // wall time at its end
  int consecutiveFailures = 0;           // 0 after a success
  std::chrono::nanoseconds retryIn{0};   // after a failure: the backoff before the next attempt
};

class SyncObserver {
 public:
  virtual ~SyncObserver() = default;
  // A change arrived and waits for a sync (upstream's QueuedUpdate).
  virtual void queued(WallTime) {}
  virtual void synced(const SyncReport&) {}
  // Every step of the loop, at least once a second while it runs: for state that ages (staleness).
  virtual void tick(SteadyTime) {}
};

struct LoopTimings {
  std::chrono::nanoseconds minSyncPeriod = std::chrono::seconds(1);
  std::chrono::nanoseconds syncPeriod = std::chrono::seconds(30);
  std::chrono::nanoseconds firstRetry = std::chrono::milliseconds(500);
  // Least time between two syncs of choices: bounds their cost under a steady stream of
  // connections (at most 50 commits a second: bench/lc_bench.py, docs/benchmarks.md); an idle
  // loop syncs a choice at once.
  std::chrono::nanoseconds choiceGap = std::chrono::milliseconds(20);
};

class SyncLoop {
 public:
  SyncLoop(const Clock& clock, source::Source& source, SyncTarget& target, LoopTimings timings);
  void addObserver(SyncObserver* o) { observers_.push_back(o); }

  // The source applied a change to the state.
  void changed();
  // Our tables were changed from outside: verify and repair in the next sync.
  void kernelChanged() {
    target_.kernelChanged();
    changed();
  }
  void setChoices(ChoiceSource* c) { choices_ = c; }
  ChoiceSource* choices() const { return choices_; }
  // The choice source has something to render.
  void chosen() { choicesPending_ = true; }
  // Syncs if a sync is due and the source has synced; returns when the next step is due.
  SteadyTime step();

  bool dirty() const { return dirty_; }
  std::chrono::nanoseconds backoff() const { return backoff_; }
  int consecutiveFailures() const { return failures_; }
  size_t syncs() const { return syncs_; }  // attempts, failed ones included
  const Clock& clock() const { return clock_; }

 private:
  SteadyTime due(SteadyTime now) const;  // when the next sync is due, seen at `now`
  SteadyTime choicesDue(SteadyTime now) const;
  void runSync(SteadyTime now);
  void runChoices(SteadyTime now);

  const Clock& clock_;
  source::Source& source_;
  SyncTarget& target_;
  LoopTimings timings_;
  std::vector<SyncObserver*> observers_;
  bool dirty_ = true;  // the first sync is due at once
  SteadyTime lastSync_{};
  SteadyTime nextForced_;
  SteadyTime nextWaitLog_;
  std::chrono::nanoseconds backoff_{0};
  std::optional<SteadyTime> retryAt_;  // the target's own retry (refused services), if any
  int failures_ = 0;
  size_t syncs_ = 0;
  std::map<std::string, WallTime> triggers_;  // taken from the source, not yet reported as synced
  ChoiceSource* choices_ = nullptr;
  bool choicesPending_ = false;
  SteadyTime lastChoices_{};
};

// Blocks: waits on the source's fd and stopFd (readable: stop), feeds changes to the loop and
// steps it. Returns when stopFd becomes readable. With a monitor, someone else's change to our
// tables makes the next sync verify against the kernel (SyncTarget::kernelChanged). A readable
// wakeFd only makes the loop step at once, so that observers' tick() runs (whoever owns the fd
// drains it there: diag::MainThreadCalls).
void runSyncLoop(SyncLoop& loop, source::Source& source, int stopFd, nft::TableMonitor* monitor = nullptr,
                 int wakeFd = -1);

}  // namespace kpn::sync
