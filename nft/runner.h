// The only code that talks to the kernel's nftables: libnftables, in a helper process.
// Commits use their own context and never list (a list on the committing context would make every
// later transaction fetch the full ruleset); listings use a second context.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nft/kernel_fingerprint.h"
#include "nft/listing.h"
#include "nft/model.h"
#include "nft/transaction.h"
#include "nft/helper_process.h"
#include "nft/nft_helper.h"

namespace kpn::nft {

struct RunResult {
  bool ok = true;
  std::string error;  // libnftables' error text; it does not say which command failed
  size_t bytes = 0;   // commit: the size of the JSON sent to libnftables
  // After a call that changes the kernel: the ruleset generation read just after it (nullopt when
  // it could not be read, or nothing was sent).
  std::optional<uint32_t> generation = std::nullopt;
};

// What the syncer needs from "the kernel"; the fake implements it for tests.
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
  // The cheap kernel fingerprint (kernel_fingerprint.h): the ruleset generation, and chain and
  // set counts of `tables`. nullopt with *error when the kernel cannot be asked.
  virtual std::optional<uint32_t> generation(std::string* error) = 0;
  virtual std::optional<std::map<TableId, TableCounts>> tableCounts(const std::vector<TableId>& tables,
                                                                    std::string* error) = 0;

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

// libnftables in a supervised helper process (nft_helper.h): a crash or exit() inside it fails one
// call, never the daemon, and a new helper takes the next one. The helper's libnftables sees only
// `tables` (other agents' tables cost nothing and cannot crash it), so list/delete other tables
// through it and they look absent.
struct NftRunnerOptions {
  std::string executable = "/proc/self/exe";  // a binary whose main() calls runNftHelperIfAsked
  std::vector<std::pair<Family, std::string>> tables = {{Family::IPv4, "kube-proxy"}, {Family::IPv6, "kube-proxy"}};
  std::chrono::milliseconds callTimeout{std::chrono::minutes(2)};  // then the helper is killed
};

class NftRunner : public Runner {
 public:
  explicit NftRunner(NftRunnerOptions options = {});
  ~NftRunner() override;
  RunResult commit(const Transaction& txn) override;
  RunResult check(const Transaction& txn) override;
  RunResult probeFamily(Family f) override;
  RunResult declareStatic(const Ruleset& rs) override;
  RunResult list(Family f, const std::string& table, ListedTable* out) override;
  RunResult deleteTable(Family f, const std::string& table) override;
  // Read in this process over a plain netlink socket: no libnftables, no cache.
  std::optional<uint32_t> generation(std::string* error) override { return readGeneration(error); }
  std::optional<std::map<TableId, TableCounts>> tableCounts(const std::vector<TableId>& tables,
                                                            std::string* error) override {
    return readTableCounts(tables, error);
  }
  // A JSON command batch for the iptables-nft tables (ip/ip6 nat, filter, mangle: upstream's
  // iptables-mode leftovers), in a helper of its own; *output gets what it printed.
  RunResult runJson(const std::string& json, std::string* output);

  // Ends the iptables-nft helper (and the cache it built) once a cleanup is over.
  void releaseIptablesHelper() { iptablesHelper_.recycle(); }

  // A JSON transaction on the start-up probe's scratch table (nft/probe.h), in a helper of its
  // own whose libnftables sees only that table: the probe adds rules, and libnftables 1.0.6 reads
  // every table of the namespace for those (../docs/architecture.md: other agents' tables). The
  // helper lives until endScratch() or a call for another table.
  RunResult commitScratch(const std::string& table, const std::string& json);
  void endScratch() { scratchHelper_.reset(); }

  int helperStarts() const { return helper_.starts(); }  // how many helpers ran so far

 private:
  // After a commit this big the helper is recycled: libnftables keeps what it built (~13 MiB in
  // millions of small blocks after a cold sync at 10k services); a new process holds none of it.
  static constexpr size_t kRecycleAfterOps = 10000;
  RunResult run(NftOp op, const std::string& buf, std::string* output = nullptr);
  RunResult runOn(SupervisedHelper& helper, NftOp op, const std::string& buf, std::string* output);
  // runOn for a call that changes the kernel: the generation is read before and after it.
  RunResult change(SupervisedHelper& helper, NftOp op, const std::string& buf, std::string* output = nullptr);
  NftRunnerOptions options_;
  SupervisedHelper helper_;
  SupervisedHelper iptablesHelper_;  // runJson: the iptables-nft tables only, started on first use
  std::string scratchTable_;
  std::unique_ptr<SupervisedHelper> scratchHelper_;  // commitScratch's, for scratchTable_
};

// The native text of the start-up declarations (table + typeof maps) of a ruleset.
std::string staticDeclarationsText(const Ruleset& rs);

}  // namespace kpn::nft
