#include "pkg/sync/loop.h"

#include <glog/logging.h>
#include <poll.h>

#include <algorithm>

namespace kpn::sync {

namespace {
constexpr auto kSourceWaitRecheck = std::chrono::milliseconds(100);
constexpr auto kWaitLogEvery = std::chrono::seconds(10);
constexpr auto kMaxIdle = std::chrono::seconds(1);  // observers' tick() runs at least this often

void mergeEarliest(std::map<std::string, WallTime>& into, const std::map<std::string, WallTime>& from) {
  for (const auto& [svc, t] : from) {
    auto [it, inserted] = into.emplace(svc, t);
    if (!inserted) it->second = std::min(it->second, t);
  }
}
}  // namespace

SyncLoop::SyncLoop(const Clock& clock, source::Source& source, SyncTarget& target, LoopTimings timings)
    : clock_(clock),
      source_(source),
      target_(target),
      timings_(timings),
      nextForced_(clock.now()),
      nextWaitLog_(clock.now() + std::chrono::seconds(2)) {
  if (timings_.syncPeriod <= std::chrono::nanoseconds(0)) timings_.syncPeriod = std::chrono::seconds(30);
}

void SyncLoop::changed() {
  dirty_ = true;
  WallTime t = clock_.wallNow();
  for (SyncObserver* o : observers_) o->queued(t);
}

SteadyTime SyncLoop::due(SteadyTime now) const {
  SteadyTime d = dirty_ ? std::max(lastSync_ + timings_.minSyncPeriod + backoff_, now) : nextForced_;
  d = std::min(d, nextForced_);
  if (retryAt_) d = std::min(d, std::max(*retryAt_, lastSync_ + timings_.minSyncPeriod));
  return d;
}

// Choices wait while the loop backs off after failures: the regular retry carries them.
SteadyTime SyncLoop::choicesDue(SteadyTime now) const {
  if (!choicesPending_ || failures_ > 0) return SteadyTime::max();
  return std::max(lastChoices_ + timings_.choiceGap, now);
}

void SyncLoop::runChoices(SteadyTime now) {
  lastChoices_ = now;
  choicesPending_ = false;
  SyncStats s = target_.syncChoices();
  if (!s.ok) dirty_ = true;  // not now (after a failure, a repair): the next sync carries them
  else if (choices_) choices_->landed(s);
}

SteadyTime SyncLoop::step() {
  SteadyTime now = clock_.now();
  SteadyTime next = due(now);
  if (now < next && now >= choicesDue(now) && source_.hasSynced()) {
    runChoices(now);
    now = clock_.now();
    next = due(now);
  }
  if (now >= next) {
    if (!source_.hasSynced()) {
      // Until the source has seen everything the table stays exactly as it is: syncing a
      // half-listed state would delete the rules of services not listed yet.
      if (now >= nextWaitLog_) {
        LOG(INFO) << "waiting for " << source_.describe() << " (" << source_.pending() << ") before the first sync";
        nextWaitLog_ = now + kWaitLogEvery;
      }
      next = now + kSourceWaitRecheck;
    } else {
      runSync(now);
      now = clock_.now();
      next = due(now);
    }
  }
  for (SyncObserver* o : observers_) o->tick(now);
  return std::min(next, choicesDue(now));
}

void SyncLoop::runSync(SteadyTime now) {
  lastSync_ = now;
  ++syncs_;
  // Trigger times are taken before the sync: a change that arrives during it has its own
  // trigger time, reported by the sync that covers it.
  mergeEarliest(triggers_, source_.takeTriggerTimes());
  SyncReport report;
  const bool carriesChoices = choicesPending_;
  choicesPending_ = false;
  report.stats = target_.sync();
  if (carriesChoices && choices_ && report.stats.ok) choices_->landed(report.stats);
  if (carriesChoices && !report.stats.ok) choicesPending_ = true;
  SteadyTime end = clock_.now();
  report.duration = end - now;
  report.finished = clock_.wallNow();
  if (report.stats.ok) {
    dirty_ = false;
    backoff_ = std::chrono::nanoseconds(0);
    failures_ = 0;
    report.changed = target_.lastChanges();
    report.triggerTimes.swap(triggers_);
  } else {
    // Retry soon, then less and less often, never slower than the sync period.
    backoff_ = std::min(backoff_ == std::chrono::nanoseconds(0) ? timings_.firstRetry : backoff_ * 2,
                        timings_.syncPeriod);
    dirty_ = true;
    ++failures_;
    report.retryIn = backoff_;
    LOG(WARNING) << "sync failed (" << failures_ << " in a row); retrying in "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(backoff_).count() << " ms";
  }
  report.consecutiveFailures = failures_;
  nextForced_ = end + timings_.syncPeriod;
  auto retry = target_.retryIn();
  retryAt_ = retry ? std::optional<SteadyTime>(end + *retry) : std::nullopt;
  for (SyncObserver* o : observers_) o->synced(report);
}

void runSyncLoop(SyncLoop& loop, source::Source& source, int stopFd, nft::TableMonitor* monitor, int wakeFd) {
  for (;;) {
    SteadyTime next = loop.step();
    auto wait = std::min<std::chrono::nanoseconds>(next - loop.clock().now(), kMaxIdle);
    auto waitMs = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count() + 1);
    // A negative fd is ignored by poll: the monitor, the wake fd and the choices are optional.
    ChoiceSource* choices = loop.choices();
    pollfd fds[5] = {{source.fd(), POLLIN, 0},
                     {stopFd, POLLIN, 0},
                     {monitor ? monitor->fd() : -1, POLLIN, 0},
                     {wakeFd, POLLIN, 0},
                     {choices ? choices->fd() : -1, POLLIN, 0}};
    int n = poll(fds, 5, static_cast<int>(waitMs));
    if (n > 0 && (fds[1].revents & POLLIN)) return;
    if (n > 0 && (fds[0].revents & POLLIN) && source.processEvents()) loop.changed();
    if (n > 0 && monitor && (fds[2].revents & POLLIN) && monitor->drain()) {
      LOG(WARNING) << "our nftables tables were changed by another process; verifying and repairing";
      loop.kernelChanged();
    }
    if (n > 0 && choices && (fds[4].revents & POLLIN) && choices->take()) loop.chosen();
  }
}

}  // namespace kpn::sync
