#include "pkg/sync/kernel_steps.h"

#include <glog/logging.h>

#include "nft/diff.h"
#include "pkg/sync/isolation.h"

namespace kpn::sync {

void KernelSteps::probeFamiliesOnce() {
  if (familiesProbed_) return;
  familiesProbed_ = true;
  std::set<nft::Family> all, supported;
  for (const nft::Table& t : skeleton_.tables) {
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

std::vector<nft::TableId> KernelSteps::ourTables() const {
  std::vector<nft::TableId> out;
  for (const nft::Table& t : skeleton_.tables)
    if (families_.count(t.family)) out.emplace_back(t.family, t.name);
  return out;
}

// With the generation read after our commit. Someone else committing between our commit and
// this read is folded into the fingerprint; the table monitor's events cover that window.
void KernelSteps::takeFingerprint(std::optional<uint32_t> gen) {
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

bool KernelSteps::fingerprintDiffers() {
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

bool KernelSteps::listKernel(std::vector<nft::ListedTable>& out) {
  out.clear();
  for (const nft::Table& t : skeleton_.tables) {
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

bool KernelSteps::listDeclared(std::vector<nft::ListedTable>& out) {
  // A listing that fails says nothing of what is declared: declare, which also names the cause
  // when the kernel refuses changes (another process owning the table: EPERM).
  if (listKernel(out) && nft::staticDeclarationsListed(skeleton_, out, families_)) return true;
  bool allFamilies = families_.size() == skeleton_.tables.size();
  auto decl = runner_.declareStatic(allFamilies ? skeleton_ : withoutOwners(skeleton_, {}, &families_));
  if (!decl.ok) LOG(ERROR) << "start-up declarations failed: " << decl.error;
  return listKernel(out);
}

}  // namespace kpn::sync
