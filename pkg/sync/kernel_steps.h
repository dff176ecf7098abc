// The syncer's steps that talk to the kernel: which families it runs nftables for, listing our
// tables (with the start-up declarations in place), and commits tracked by a cheap fingerprint
// that tells a sync with nothing to do whether someone changed our tables since.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "nft/runner.h"

namespace kpn::sync {

class KernelSteps {
 public:
  // `skeleton`: our tables' declarations (render::Renderer::skeleton), one table per family.
  KernelSteps(nft::Runner& runner, nft::Ruleset skeleton) : runner_(runner), skeleton_(std::move(skeleton)) {}

  // Once, before the first listing: the families this kernel runs nftables for (all of them,
  // with an error logged, when it runs none).
  void probeFamiliesOnce();
  const std::set<nft::Family>& families() const { return families_; }

  // The kernel's tables, aligned with the skeleton's (a family we do not program gets an empty
  // entry), with the start-up declarations in place: declared only when the listing lacks them
  // (declaring what exists is still a commit, whose events would look like outside damage to a
  // monitor that cannot tell it is ours). False when a listing failed.
  bool listDeclared(std::vector<nft::ListedTable>& out);

  // A sync with nothing to do: is the kernel still what we committed? The generation alone says
  // "nobody committed"; when it moved (any table, anyone), our tables' chain and set counts decide.
  bool fingerprintDiffers();
  uint64_t fingerprintMismatches() const { return fingerprintMismatches_; }

  void expectTransaction(size_t ops) { runner_.expectTransaction(ops); }
  nft::RunResult commit(const nft::Transaction& txn) { return runner_.commit(txn); }
  nft::RunResult check(const nft::Transaction& txn) { return runner_.check(txn); }
  // After a commit of ours that landed: the fingerprint to compare with from now on, when the
  // commit changed something or there is none yet.
  void committed(const nft::Transaction& txn, const nft::RunResult& r) {
    if (!txn.empty() || !fingerprint_) takeFingerprint(r.generation);
  }

 private:
  bool listKernel(std::vector<nft::ListedTable>& out);
  std::vector<nft::TableId> ourTables() const;
  void takeFingerprint(std::optional<uint32_t> generation);

  nft::Runner& runner_;
  const nft::Ruleset skeleton_;
  bool familiesProbed_ = false;
  std::set<nft::Family> families_;                     // supported
  std::optional<nft::KernelFingerprint> fingerprint_;  // after our last commit
  uint64_t fingerprintMismatches_ = 0;
};

}  // namespace kpn::sync
