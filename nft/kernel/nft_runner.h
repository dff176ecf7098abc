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

#include "nft/kernel/fingerprint_reader.h"
#include "nft/kernel/helper_process.h"
#include "nft/kernel/nft_helper.h"
#include "nft/runner.h"

namespace kpn::nft {

// libnftables in a supervised helper process (nft/kernel/nft_helper.h): a crash or exit() inside
// it fails one call, never the daemon, and a new helper takes the next one. The helper's
// libnftables sees only `tables` (other agents' tables cost nothing and cannot crash it), so
// list/delete other tables through it and they look absent.
struct NftRunnerOptions {
  std::string executable = "/proc/self/exe";  // a binary whose main() calls runNftHelperIfAsked
  std::vector<std::pair<Family, std::string>> tables;  // the caller's tables: the helper's cache scope
  std::string probeTable;  // probeFamily's (never created: a check only)
  std::chrono::milliseconds callTimeout{std::chrono::minutes(2)};  // then the helper is killed
};

class NftRunner : public Runner {
 public:
  explicit NftRunner(NftRunnerOptions options);
  ~NftRunner() override;
  RunResult commit(const Transaction& txn) override;
  RunResult check(const Transaction& txn) override;
  RunResult probeFamily(Family f) override;
  RunResult declareStatic(const Ruleset& rs) override;
  RunResult list(Family f, const std::string& table, ListedTable* out) override;
  RunResult deleteTable(Family f, const std::string& table) override;
  // A Prepare request (NftOp::Prepare) when the transaction is big enough for the helper to
  // populate its heap: then that happens while the daemon renders, not after the JSON arrived.
  void expectTransaction(size_t ops) override;
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

  // A JSON transaction on the start-up probe's scratch table (nft/kernel/probe.h), in a helper of its
  // own whose libnftables sees only that table: the probe adds rules, and libnftables 1.0.6 reads
  // every table of the namespace for those (../docs/architecture.md: other agents' tables). The
  // helper lives until endScratch() or a call for another table.
  RunResult commitScratch(const std::string& table, const std::string& json);
  void endScratch() { scratchHelper_.reset(); }

  int helperStarts() const { return helper_.starts(); }  // how many helpers ran so far
  // Starts the libnftables helper of the commits now rather than at the first call.
  void startHelper() { helper_.startIfNone(); }
  void recycleHelper() { helper_.recycle(); }

  // A request to the helper, written in pieces (SupervisedHelper::callInPieces).
  using Request = std::function<bool(const SupervisedHelper::PieceWriter&)>;

 private:
  // After a commit this big the helper is recycled: libnftables keeps what it built (~13 MiB in
  // millions of small blocks after a cold sync at 10k services); a new process holds none of it.
  static constexpr size_t kRecycleAfterOps = 10000;
  RunResult run(NftOp op, const std::string& buf, std::string* output = nullptr);
  RunResult runOn(SupervisedHelper& helper, const Request& request, std::string* output);
  // runOn for a call that changes the kernel: the generation is read before and after it.
  RunResult change(SupervisedHelper& helper, NftOp op, const std::string& buf, std::string* output = nullptr);
  RunResult change(SupervisedHelper& helper, const Request& request, std::string* output = nullptr);
  NftRunnerOptions options_;
  SupervisedHelper helper_;
  SupervisedHelper iptablesHelper_;  // runJson: the iptables-nft tables only, started on first use
  std::string scratchTable_;
  std::unique_ptr<SupervisedHelper> scratchHelper_;  // commitScratch's, for scratchTable_
};

}  // namespace kpn::nft
