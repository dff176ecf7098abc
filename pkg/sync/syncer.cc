#include "pkg/sync/syncer.h"

#include <glog/logging.h>
#include <malloc.h>

#include <chrono>

namespace kpn::sync {

namespace {
double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

const char kServiceOwnerPrefix[] = "svc ";  // the renderer's owner of a service's Part

bool isServiceOwner(const std::string& owner) { return owner.rfind(kServiceOwnerPrefix, 0) == 0; }
std::string serviceOfOwner(const std::string& owner) { return owner.substr(sizeof kServiceOwnerPrefix - 1); }

long long millis(std::chrono::steady_clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }
}  // namespace

Syncer::Syncer(render::Renderer& renderer, nft::Runner& runner) : renderer_(renderer), runner_(runner) {}

void Syncer::probeFamilies() {
  familiesProbed_ = true;
  std::set<nft::Family> all, supported;
  for (const nft::Table& t : renderer_.skeleton().tables) {
    all.insert(t.family);
    auto r = runner_.probeFamily(t.family);
    if (r.ok) supported.insert(t.family);
    else LOG(WARNING) << "nftables family " << nft::familyName(t.family) << " is not available on this node (" << r.error
                      << "); its services are not programmed";
  }
  if (supported.empty()) {
    LOG(ERROR) << "no nftables family passed the start-up check; trying all of them anyway";
    supported = all;
  }
  families_ = std::move(supported);
}

std::vector<nft::TableId> Syncer::ourTables() const {
  std::vector<nft::TableId> out;
  for (const nft::Table& t : renderer_.skeleton().tables)
    if (families_.count(t.family)) out.emplace_back(t.family, t.name);
  return out;
}

// After each commit of ours, with the generation read after it. Someone else committing between
// our commit and this read is folded into the fingerprint; the table monitor's events cover that
// window.
void Syncer::takeFingerprint(std::optional<uint32_t> gen) {
  std::string error = "no generation";
  if (!gen) gen = runner_.generation(&error);
  auto counts = gen ? runner_.tableCounts(ourTables(), &error) : std::nullopt;
  if (!counts) {
    VLOG(2) << "no kernel fingerprint (" << error << "); the next periodic sync cannot check it";
    fingerprint_.reset();
    return;
  }
  fingerprint_ = nft::KernelFingerprint{*gen, std::move(*counts)};
}

// A sync with nothing to do: is the kernel still what we committed? The generation alone says
// "nobody committed"; when it moved (any table, anyone), our tables' chain and set counts decide.
bool Syncer::fingerprintDiffers() {
  if (!fingerprint_) return false;
  std::string error;
  auto gen = runner_.generation(&error);
  if (!gen) {
    VLOG(2) << "cannot read the kernel's generation (" << error << ")";
    return false;
  }
  if (*gen == fingerprint_->generation) return false;
  auto counts = runner_.tableCounts(ourTables(), &error);
  if (!counts) {
    VLOG(2) << "cannot count our tables' chains and sets (" << error << ")";
    return false;
  }
  if (*counts == fingerprint_->tables) {
    fingerprint_->generation = *gen;  // someone else's commit, elsewhere
    return false;
  }
  for (const auto& [id, was] : fingerprint_->tables) {
    const nft::TableCounts& now = (*counts)[id];
    if (!(now == was))
      LOG(WARNING) << "table " << nft::familyName(id.first) << " " << id.second << " has " << now.chains << " chains and "
                   << now.sets << " sets, " << was.chains << " and " << was.sets
                   << " after our last commit: changed from outside; this sync is full";
  }
  ++fingerprintMismatches_;
  return true;
}

// Aligned with the skeleton's tables; a family we do not program gets an empty entry.
bool Syncer::listKernel(std::vector<nft::ListedTable>& out) {
  out.clear();
  for (const nft::Table& t : renderer_.skeleton().tables) {
    out.emplace_back();
    if (!families_.count(t.family)) continue;
    auto r = runner_.list(t.family, t.name, &out.back());
    if (!r.ok) {
      LOG(ERROR) << "cannot list table " << nft::familyName(t.family) << " " << t.name << ": " << r.error;
      return false;
    }
  }
  return true;
}

bool Syncer::listDeclared(std::vector<nft::ListedTable>& out) {
  const nft::Ruleset& skeleton = renderer_.skeleton();
  // A listing that fails says nothing of what is declared: declare, which also names the cause
  // when the kernel refuses changes (another process owning the table: EPERM).
  if (listKernel(out) && nft::staticDeclarationsListed(skeleton, out, families_)) return true;
  bool allFamilies = families_.size() == skeleton.tables.size();
  auto decl = runner_.declareStatic(allFamilies ? skeleton : withoutOwners(skeleton, {}, &families_));
  if (!decl.ok) LOG(ERROR) << "start-up declarations failed: " << decl.error;
  return listKernel(out);
}

nft::Plan Syncer::plan(const nft::Ruleset& desired, const std::vector<nft::ListedTable>& kernel,
                       const std::set<std::string>* onlyOwners, SyncStats::Plan* how) const {
  if (mode_ == Mode::Incremental) {
    if (how) *how = SyncStats::Plan::Incremental;
    return nft::planIncremental(committed_, desired, onlyOwners);
  }
  if (mode_ == Mode::Startup || mode_ == Mode::Repair) {
    nft::Plan p = nft::planReconcile(kernel, desired);
    if (how) *how = SyncStats::Plan::Reconcile;
    if (!p.needsFull) return p;
  }
  if (how) *how = SyncStats::Plan::Full;
  return nft::planFull(kernel, desired);
}

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
  SyncStats stats;  // what a sync that lists nothing returns
  lastWasIncremental_ = false;
  std::set<std::string> changed;
  changed.swap(st.changedServices);
  // The renderer compares the Node, ServiceCIDRs and host addresses itself and re-renders what
  // depends on them; the flags only say that the source saw a change.
  st.nodeChanged = false;
  st.serviceCIDRsChanged = false;
  if (!familiesProbed_) probeFamilies();
  // Nothing changed on our side (a periodic sync, or a retry): check the kernel is as we left it.
  if (mode_ == Mode::Incremental && changed.empty() && fingerprintDiffers()) mode_ = Mode::Repair;

  std::vector<nft::ListedTable> kernel;
  if (mode_ != Mode::Incremental) {
    std::vector<nft::ListedTable> aligned;
    if (!listDeclared(aligned)) {
      listener_->syncFailed("cannot list our tables");
      changed.merge(st.changedServices);
      st.changedServices.swap(changed);
      return stats;
    }
    if (mode_ == Mode::Startup) renderer_.adoptSlots(aligned);
    const auto& tables = renderer_.skeleton().tables;
    for (size_t i = 0; i < aligned.size(); ++i)
      if (families_.count(tables[i].family)) kernel.push_back(std::move(aligned[i]));
  }
  return renderAndCommit(st, changed, kernel, false);
}

SyncStats Syncer::syncChoices(state::ClusterState& st) {
  SyncStats stats;
  if (mode_ != Mode::Incremental) return stats;  // the next sync compares with the kernel, choices included
  stats.ok = true;
  if (!renderer_.hasChoices()) return stats;
  std::set<std::string> none;
  return renderAndCommit(st, none, {}, true);
}

SyncStats Syncer::renderAndCommit(state::ClusterState& st, std::set<std::string>& changed,
                                  const std::vector<nft::ListedTable>& kernel, bool choicesOnly) {
  SyncStats stats;
  const bool allFamilies = families_.size() == renderer_.skeleton().tables.size();
  auto tRender = std::chrono::steady_clock::now();
  const nft::Ruleset& rendered = renderer_.render(st, mode_ == Mode::Incremental ? &changed : nullptr);
  stats.renderMs = msSince(tRender);

  // Owners of the renderer's touched Parts; refused owners whose retry is due (or whose service
  // changed) join them, the others stay out.
  const auto now = std::chrono::steady_clock::now();
  std::set<std::string> touchedOwners;
  const std::set<std::string>* touched = renderer_.touchedOwners();
  if (touched) touchedOwners = *touched;
  std::set<std::string> leftOut = rejected_.excluded(now, touched);
  for (const auto& owner : rejected_.owners())
    if (!leftOut.count(owner)) touchedOwners.insert(owner);
  const std::set<std::string>* onlyOwners = touched ? &touchedOwners : nullptr;
  const bool filtering = !allFamilies || !rejected_.empty();
  nft::Ruleset filtered;
  if (filtering) filtered = withoutOwners(rendered, leftOut, &families_);
  const nft::Ruleset* desired = filtering ? &filtered : &rendered;

  auto tDiff = std::chrono::steady_clock::now();
  nft::Plan p = plan(*desired, kernel, onlyOwners, &stats.plan);
  if (mode_ == Mode::Incremental && p.needsFull) {
    LOG(WARNING) << "a declaration or hook changed; resyncing fully";
    mode_ = Mode::Full;
    if (choicesOnly) return stats;  // the next sync is full, with the choices
    st.changedServices.merge(changed);
    return sync(st);
  }
  stats.diffMs = msSince(tDiff);
  stats.full = mode_ != Mode::Incremental;
  stats.ops = p.txn.size();

  auto tCommit = std::chrono::steady_clock::now();
  nft::RunResult r = runner_.commit(p.txn);
  std::set<std::string> refused;
  if (!r.ok) {
    ++failures_.rejectedTransactions;
    stats.transactionRejected = true;
    LOG(WARNING) << "nft rejected a transaction of " << stats.ops << " operations (" << r.error
                 << "); looking for the services it refuses";
    VLOG(4) << "rejected transaction:\n" << p.txn.toJson();
    // The candidates: the services this plan touches (all of them when it compares everything).
    std::set<std::string> candidates;
    for (const nft::Table& t : desired->tables)
      for (const auto& [owner, part] : t.parts)
        if (isServiceOwner(owner) && (!onlyOwners || onlyOwners->count(owner))) candidates.insert(owner);
    std::set<std::string> widened = touchedOwners;
    widened.insert(candidates.begin(), candidates.end());
    auto rejects = [&](const std::set<std::string>& excluded) -> std::optional<std::string> {
      nft::Ruleset trial = withoutOwners(*desired, excluded);
      nft::RunResult c = runner_.check(plan(trial, kernel, onlyOwners ? &widened : nullptr).txn);
      return c.ok ? std::nullopt : std::optional<std::string>(c.error);
    };
    std::optional<std::string> without = rejects(candidates);
    if (without) {
      LOG(ERROR) << "sync failed: nft rejects the transaction even without any service's rules (" << *without
                 << "); the previous ruleset stays in place and the next sync is full";
      listener_->syncFailed(*without);
      stats.commitMs = msSince(tCommit);
      mode_ = Mode::Full;
      return stats;
    }
    std::map<std::string, std::string> bad = findRejected(candidates, rejects);
    for (const auto& [owner, err] : bad) refused.insert(owner);
    filtered = withoutOwners(*desired, refused);
    desired = &filtered;
    p = plan(*desired, kernel, onlyOwners ? &widened : nullptr);
    stats.ops = p.txn.size();
    r = runner_.commit(p.txn);
    if (r.ok) {
      for (const auto& [owner, err] : bad) {
        auto retry = rejected_.reject(owner, std::chrono::steady_clock::now());
        ++failures_.serviceRejections;
        ++stats.servicesRefusedNow;
        LOG(ERROR) << "Service " << serviceOfOwner(owner) << ": nft refuses its rules (" << err
                   << "); left out, everything else programmed; retrying in " << millis(retry) << " ms";
        listener_->serviceRefused(serviceOfOwner(owner), err);
      }
    }
  }
  stats.commitMs = msSince(tCommit);
  stats.bytes = r.bytes;
  if (!r.ok) {
    LOG(ERROR) << "sync failed: nft rejected a transaction of " << stats.ops << " operations (" << r.error
               << "); the previous ruleset stays in place and the next sync is full";
    listener_->syncFailed(r.error);
    VLOG(4) << "rejected transaction:\n" << p.txn.toJson();
    mode_ = Mode::Full;
    return stats;
  }
  // Bookkeeping after the commit: packets already see the new rules. after_ms in the log line is
  // this part (it delays the next sync, not this one's rules).
  auto tAfter = std::chrono::steady_clock::now();
  for (const auto& owner : rejected_.owners()) {
    bool exists = false;
    for (const nft::Table& t : rendered.tables) exists = exists || t.parts.count(owner);
    if (!exists) {
      rejected_.accepted(owner);  // the service is gone (or no longer ours)
    } else if (!leftOut.count(owner) && !refused.count(owner)) {
      rejected_.accepted(owner);
      LOG(INFO) << "Service " << serviceOfOwner(owner) << ": its rules are programmed now";
      listener_->serviceProgrammedAgain(serviceOfOwner(owner));
    }
  }
  stats.rejectedServices = rejected_.size();
  if (!p.txn.empty() || !fingerprint_) takeFingerprint(r.generation);
  // Not `desired == &rendered ? rendered : std::move(filtered)`: that conditional is a prvalue,
  // a copy of the whole rendered ruleset (10k Parts' map: 3.4 ms after every change at 10k).
  nft::applyCommitted(committed_, *desired, p);
  if (!choicesOnly) {
    lastWasIncremental_ = mode_ == Mode::Incremental && refused.empty();
    lastChanges_ = std::move(changed);
  }
  mode_ = Mode::Incremental;
  stats.ok = true;
  if (afterCommit_ && afterCommit_()) afterCommit_ = nullptr;
  // A big transaction leaves libnftables' and our buffers' pages behind; hand them back.
  if (stats.ops > 10000) malloc_trim(0);
  stats.afterMs = msSince(tAfter);
  VLOG(2) << (choicesOnly ? "choices synced" : "sync done") << " full=" << stats.full << " ops=" << stats.ops
          << " render_ms=" << stats.renderMs
          << " diff_ms=" << stats.diffMs << " commit_ms=" << stats.commitMs << " after_ms=" << stats.afterMs;
  return stats;
}

}  // namespace kpn::sync
