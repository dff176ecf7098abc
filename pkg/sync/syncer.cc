#include "pkg/sync/syncer.h"

#include <glog/logging.h>
#include <malloc.h>

#include <chrono>

namespace kpn::sync {

namespace {
double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

Syncer::Syncer(render::Renderer& renderer, nft::Runner& runner) : renderer_(renderer), runner_(runner) {}

bool Syncer::listKernel(std::vector<nft::ListedTable>& out) {
  out.clear();
  for (const nft::Table& t : renderer_.skeleton().tables) {
    out.emplace_back();
    auto r = runner_.list(t.family, t.name, &out.back());
    if (!r.ok) {
      LOG(ERROR) << "cannot list table " << nft::familyName(t.family) << " " << t.name << ": " << r.error;
      return false;
    }
  }
  return true;
}

SyncStats Syncer::sync(state::ClusterState& st) {
  SyncStats stats;
  lastWasIncremental_ = false;
  std::set<std::string> changed;
  changed.swap(st.changedServices);
  // The renderer compares the Node, ServiceCIDRs and host addresses itself and re-renders what
  // depends on them; the flags only say that the source saw a change.
  st.nodeChanged = false;
  st.serviceCIDRsChanged = false;

  nft::Plan plan;
  std::vector<nft::ListedTable> kernel;
  if (mode_ != Mode::Incremental) {
    // Declarations nft 1.0.6 JSON cannot express; idempotent, so repeating them is harmless.
    auto decl = runner_.declareStatic(renderer_.skeleton());
    if (!decl.ok) LOG(ERROR) << "start-up declarations failed: " << decl.error;
    if (!listKernel(kernel)) {
      changed.merge(st.changedServices);
      st.changedServices.swap(changed);
      return stats;
    }
    if (mode_ == Mode::Startup) renderer_.adoptSlots(kernel);
  }
  auto tRender = std::chrono::steady_clock::now();
  const nft::Ruleset& desired = renderer_.render(st, mode_ == Mode::Incremental ? &changed : nullptr);
  stats.renderMs = msSince(tRender);

  auto tDiff = std::chrono::steady_clock::now();
  if (mode_ == Mode::Incremental) {
    plan = nft::planIncremental(committed_, desired, renderer_.touchedOwners());
    if (plan.needsFull) {
      LOG(WARNING) << "a declaration or hook changed; resyncing fully";
      mode_ = Mode::Full;
      st.changedServices.merge(changed);
      return sync(st);
    }
  } else if (mode_ == Mode::Startup) {
    plan = nft::planReconcile(kernel, desired);
    stats.plan = SyncStats::Plan::Reconcile;
    if (plan.needsFull) {
      plan = nft::planFull(kernel, desired);
      stats.plan = SyncStats::Plan::Full;
    }
  } else {
    plan = nft::planFull(kernel, desired);
    stats.plan = SyncStats::Plan::Full;
  }
  if (mode_ == Mode::Incremental) stats.plan = SyncStats::Plan::Incremental;
  stats.diffMs = msSince(tDiff);
  stats.full = mode_ != Mode::Incremental;
  stats.ops = plan.txn.size();

  auto tCommit = std::chrono::steady_clock::now();
  nft::RunResult r = runner_.commit(plan.txn);
  stats.commitMs = msSince(tCommit);
  stats.bytes = r.bytes;
  if (!r.ok) {
    LOG(ERROR) << "sync failed: nft rejected a transaction of " << stats.ops << " operations (" << r.error
               << "); the previous ruleset stays in place and the next sync is full";
    VLOG(4) << "rejected transaction:\n" << plan.txn.toJson();
    mode_ = Mode::Full;
    return stats;
  }
  // Bookkeeping after the commit: packets already see the new rules. after_ms in the log line is
  // this part (it delays the next sync, not this one's rules).
  auto tAfter = std::chrono::steady_clock::now();
  nft::applyCommitted(committed_, desired, plan);
  lastWasIncremental_ = mode_ == Mode::Incremental;
  lastChanges_ = std::move(changed);
  mode_ = Mode::Incremental;
  stats.ok = true;
  if (afterCommit_ && afterCommit_()) afterCommit_ = nullptr;
  // A big transaction leaves libnftables' and our buffers' pages behind; hand them back.
  if (stats.ops > 10000) malloc_trim(0);
  stats.afterMs = msSince(tAfter);
  VLOG(2) << "sync done full=" << stats.full << " ops=" << stats.ops << " render_ms=" << stats.renderMs
          << " diff_ms=" << stats.diffMs << " commit_ms=" << stats.commitMs << " after_ms=" << stats.afterMs;
  return stats;
}

}  // namespace kpn::sync
