// What the syncer needs from "the kernel", as an interface: the real one talks to libnftables in a
// helper process (nft/kernel/nft_runner.h), the fake keeps tables in memory (nft/fake.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nft/kernel_fingerprint.h"
#include "nft/listing.h"
#include "nft/model.h"
#include "nft/transaction.h"

namespace kpn::nft {

struct RunResult {
  bool ok = true;
  std::string error;  // libnftables' error text; it does not say which command failed
  size_t bytes = 0;   // commit: the size of the JSON sent to libnftables
  // After a call that changes the kernel: the ruleset generation read just after it (nullopt when
  // it could not be read, or nothing was sent).
  std::optional<uint32_t> generation = std::nullopt;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // One atomic transaction. An empty transaction is not sent.
  virtual RunResult commit(const Transaction& txn) = 0;
  // What commit would answer, without applying anything: the kernel validates the whole batch
  // and aborts it (nft --check). Finds the part of a rejected transaction that the kernel refuses.
  virtual RunResult check(const Transaction& txn) = 0;
  // Whether this kernel runs nftables for family f at all (a check of `add table`): upstream
  // runs single-stack when one family's nftables is missing.
  virtual RunResult probeFamily(Family f) = 0;
  // Start-up declarations that nft 1.0.6 JSON cannot express (typeof maps), in native syntax, in
  // their own transaction. Idempotent.
  virtual RunResult declareStatic(const Ruleset& rs) = 0;
  // Our table as the kernel holds it; exists=false when absent.
  virtual RunResult list(Family f, const std::string& table, ListedTable* out) = 0;
  virtual RunResult deleteTable(Family f, const std::string& table) = 0;  // absent is fine
  // The cheap kernel fingerprint (nft/kernel_fingerprint.h): the ruleset generation, and chain
  // and set counts of `tables`. nullopt with *error when the kernel cannot be asked.
  virtual std::optional<uint32_t> generation(std::string* error) = 0;
  virtual std::optional<std::map<TableId, TableCounts>> tableCounts(const std::vector<TableId>& tables,
                                                                    std::string* error) = 0;
  // A hint, before the transaction is built: a commit of about `ops` operations comes next (a
  // cold start into empty tables). The real runner has its helper make the memory for it ready
  // meanwhile; nothing reaches the kernel.
  virtual void expectTransaction(size_t ops) { (void)ops; }

  // Told the generation of each change this runner made, whenever that is certain: the generation
  // read just before the call and just after it moved by exactly one. This is how the table monitor
  // tells our commits' nftables events from anyone else's. An event names the committing process
  // by its PID in the kernel's initial PID namespace, which a daemon in a container cannot match
  // with the PIDs it sees; the generation is the same number in every namespace.
  void onOwnCommit(std::function<void(uint32_t generation)> note) { ownCommit_ = std::move(note); }
  // Told just before (true) and just after (false) a commit of more than kBigCommitOps operations
  // (a cold sync, a full resync): the table monitor stops listening meanwhile
  // (TableMonitor::deafen). The commit's own generation is noted before the second call.
  void onBigCommit(std::function<void(bool starting)> note) { bigCommit_ = std::move(note); }
  static constexpr size_t kBigCommitOps = 10000;

 protected:
  // For implementations: report a change as ours when `before` and `after` say it was.
  void noteChange(std::optional<uint32_t> before, std::optional<uint32_t> after) const {
    if (ownCommit_ && before && after && *after == *before + 1) ownCommit_(*after);
  }
  void noteBigCommit(bool starting) const {
    if (bigCommit_) bigCommit_(starting);
  }

 private:
  std::function<void(uint32_t)> ownCommit_;
  std::function<void(bool)> bigCommit_;
};

}  // namespace kpn::nft
