#include "pkg/sync/syncer.h"

#include <glog/logging.h>
#include <malloc.h>

#include <chrono>

#include "pkg/sync/clock.h"
#include "pkg/sync/transaction_estimate.h"

namespace kpn::sync {

namespace {
long long millis(std::chrono::steady_clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }
}  // namespace

Syncer::Syncer(render::Renderer& renderer, nft::Runner& runner)
    : renderer_(renderer), kernel_(runner, renderer.skeleton()) {}

std::optional<std::chrono::nanoseconds> Syncer::retryIn() const {
  auto at = rejected_.nextRetry();
  if (!at) return std::nullopt;
  return std::max<std::chrono::nanoseconds>(*at - std::chrono::steady_clock::now(), std::chrono::nanoseconds(0));
}

std::set<std::string> Syncer::rejectedServices() const {
  std::set<std::string> out;
  for (const auto& owner : rejected_.owners()) out.insert(serviceOfOwner(owner));
  return out;
}

SyncStats Syncer::sync(state::ClusterState& st) {
  lastWasIncremental_ = false;
  // The renderer compares the Node, ServiceCIDRs and host addresses itself and re-renders what
  // depends on them; the journal's flags only say that the source saw a change.
  std::set<std::string> taken = st.takeChanges().services;
  if (pending_.empty()) pending_.swap(taken);
  else pending_.merge(taken);
  kernel_.probeFamiliesOnce();
  // Nothing changed on our side (a periodic sync, or a retry): check the kernel is as we left it.
  if (mode_ == Mode::Incremental && pending_.empty() && kernel_.fingerprintDiffers()) mode_ = Mode::Repair;
  std::optional<SyncStats> stats = attempt(st, false);
  // An incremental plan met a changed declaration: the mode is Full now, and this sync too.
  if (!stats) stats = attempt(st, false);
  return *stats;
}

SyncStats Syncer::syncChoices(state::ClusterState& st) {
  SyncStats stats;
  if (mode_ != Mode::Incremental) return stats;  // the next sync compares with the kernel, choices included
  stats.ok = true;
  if (!renderer_.hasChoices()) return stats;
  return *attempt(st, true);
}

// What this sync plans against: what we committed, or (start-up, repair, full) the kernel's
// listing. nullopt when the listing failed.
std::optional<PlanBase> Syncer::planBase() {
  if (mode_ == Mode::Incremental) return PlanBase::fromCommitted(committed_);
  std::vector<nft::ListedTable> listed;
  if (!kernel_.listDeclared(listed)) return std::nullopt;
  return PlanBase::fromListing(std::move(listed), mode_ == Mode::Full);
}

// One render, plan and commit in the current mode. nullopt: the incremental plan found a
// declaration or hook changed; the mode is Full now, to be tried again (a choices-only sync
// leaves that to the next sync).
std::optional<SyncStats> Syncer::attempt(const state::ClusterState& st, bool choicesOnly) {
  std::optional<PlanBase> base = planBase();
  if (!base) {
    listener_->syncFailed("cannot list our tables");
    return SyncStats{};
  }
  // Into (nearly) empty tables the commit is the whole state (a cold start): announced now, the
  // helper readies the memory for it while we render and diff.
  if (base->kind != PlanBase::Kind::Committed && !choicesOnly)
    if (size_t ops = operationsToFill(st, base->listed); ops > nft::Runner::kBigCommitOps) kernel_.expectTransaction(ops);
  static const std::set<std::string> kNoChanges;  // choices only: the renderer re-renders the chosen services
  PlanRequest req;
  req.changed = mode_ != Mode::Incremental ? nullptr : choicesOnly ? &kNoChanges : &pending_;
  req.adoptSlots = mode_ == Mode::Startup;
  req.families = &kernel_.families();
  req.refused = &rejected_;
  req.now = std::chrono::steady_clock::now();
  PlannedSync planned = renderAndPlan(renderer_, st, req, std::move(*base));
  SyncStats stats;
  stats.renderMs = planned.renderMs;
  if (mode_ == Mode::Incremental && planned.plan.needsFull) {
    LOG(WARNING) << "a declaration or hook changed; resyncing fully";
    mode_ = Mode::Full;
    if (choicesOnly) return stats;  // the next sync is full, with the choices
    return std::nullopt;
  }
  stats.diffMs = planned.diffMs;
  stats.plan = planned.kind;
  return commit(planned, stats, choicesOnly);
}

SyncStats Syncer::commit(PlannedSync& planned, SyncStats stats, bool choicesOnly) {
  stats.full = mode_ != Mode::Incremental;
  stats.ops = planned.plan.txn.size();
  auto tCommit = std::chrono::steady_clock::now();
  std::optional<nft::RunResult> r = kernel_.commit(planned.plan.txn);
  std::set<std::string> refused;
  if (!r->ok) {
    ++failures_.rejectedTransactions;
    stats.transactionRejected = true;
    LOG(WARNING) << "nft rejected a transaction of " << stats.ops << " operations (" << r->error
                 << "); looking for the services it refuses";
    VLOG(4) << "rejected transaction:\n" << planned.plan.txn.toJson();
    r = commitWithoutRefused(planned, stats, refused);
  }
  stats.commitMs = msSince(tCommit);
  if (r) stats.bytes = r->bytes;
  if (r && !r->ok) {
    LOG(ERROR) << "sync failed: nft rejected a transaction of " << stats.ops << " operations (" << r->error
               << "); the previous ruleset stays in place and the next sync is full";
    listener_->syncFailed(r->error);
    VLOG(4) << "rejected transaction:\n" << planned.plan.txn.toJson();
  }
  if (!r || !r->ok) {
    mode_ = Mode::Full;
    return stats;
  }
  // Bookkeeping after the commit: packets already see the new rules. after_ms in the log line is
  // this part (it delays the next sync, not this one's rules).
  auto tAfter = std::chrono::steady_clock::now();
  settle(planned, *r, refused, choicesOnly);
  stats.rejectedServices = rejected_.size();
  stats.ok = true;
  // A big transaction leaves libnftables' and our buffers' pages behind; hand them back.
  if (stats.ops > 10000) malloc_trim(0);
  stats.afterMs = msSince(tAfter);
  VLOG(2) << (choicesOnly ? "choices synced" : "sync done") << " full=" << stats.full << " ops=" << stats.ops
          << " render_ms=" << stats.renderMs
          << " diff_ms=" << stats.diffMs << " commit_ms=" << stats.commitMs << " after_ms=" << stats.afterMs;
  return stats;
}

// The kernel refused the plan as a whole: find the services it refuses (pkg/sync/isolation.h),
// leave them out and commit the rest. nullopt when no service is to blame (reported here).
std::optional<nft::RunResult> Syncer::commitWithoutRefused(PlannedSync& planned, SyncStats& stats,
                                                           std::set<std::string>& refused) {
  ServiceRefusals found = findRefusedServices(planned.desired(), planned.owners(), [&](const nft::Ruleset& trial) {
    nft::RunResult c = kernel_.check(planned.planOf(trial).txn);
    return c.ok ? std::nullopt : std::optional<std::string>(c.error);
  });
  if (found.withoutServices) {
    LOG(ERROR) << "sync failed: nft rejects the transaction even without any service's rules (" << *found.withoutServices
               << "); the previous ruleset stays in place and the next sync is full";
    listener_->syncFailed(*found.withoutServices);
    return std::nullopt;
  }
  for (const auto& [owner, err] : found.owners) refused.insert(owner);
  planned.leaveOut(refused);
  stats.ops = planned.plan.txn.size();
  nft::RunResult r = kernel_.commit(planned.plan.txn);
  if (!r.ok) return r;
  for (const auto& [owner, err] : found.owners) {
    auto retry = rejected_.reject(owner, std::chrono::steady_clock::now());
    ++failures_.serviceRejections;
    ++stats.servicesRefusedNow;
    LOG(ERROR) << "Service " << serviceOfOwner(owner) << ": nft refuses its rules (" << err
               << "); left out, everything else programmed; retrying in " << millis(retry) << " ms";
    listener_->serviceRefused(serviceOfOwner(owner), err);
  }
  return r;
}

// A commit landed: the refused services tried again, the fingerprint, the committed picture,
// the journal's pending services, and the work that waited for our rules.
void Syncer::settle(const PlannedSync& planned, const nft::RunResult& r, const std::set<std::string>& refused,
                    bool choicesOnly) {
  for (const auto& owner : rejected_.settle(*planned.rendered, planned.leftOut, refused)) {
    LOG(INFO) << "Service " << serviceOfOwner(owner) << ": its rules are programmed now";
    listener_->serviceProgrammedAgain(serviceOfOwner(owner));
  }
  kernel_.committed(planned.plan.txn, r);
  nft::applyCommitted(committed_, planned.desired(), planned.plan);
  if (!choicesOnly) {
    lastWasIncremental_ = mode_ == Mode::Incremental && refused.empty();
    lastChanges_ = std::move(pending_);
    pending_.clear();
  }
  mode_ = Mode::Incremental;
  if (afterCommit_ && afterCommit_()) afterCommit_ = nullptr;
}

}  // namespace kpn::sync
