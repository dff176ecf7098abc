// The only code that talks to the kernel's nftables: libnftables, in-process.
// Commits use their own context and never list (a list on the committing context would make every
// later transaction fetch the full ruleset); listings use a second context.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nft/listing.h"
#include "nft/model.h"
#include "nft/transaction.h"
#include "nft/worker_thread.h"

struct nft_ctx;

namespace kpn::nft {

struct RunResult {
  bool ok = true;
  std::string error;  // libnftables' error text; it does not say which command failed
  size_t bytes = 0;   // commit: the size of the JSON sent to libnftables
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
};

class NftRunner : public Runner {
 public:
  NftRunner();
  ~NftRunner() override;
  RunResult commit(const Transaction& txn) override;
  RunResult check(const Transaction& txn) override;
  RunResult probeFamily(Family f) override;
  RunResult declareStatic(const Ruleset& rs) override;
  RunResult list(Family f, const std::string& table, ListedTable* out) override;
  RunResult deleteTable(Family f, const std::string& table) override;
  // A JSON command batch on the listing context, for tables that are not ours (the iptables-nft
  // leftovers): *output gets what it printed. Never used for our own table.
  RunResult runJson(const std::string& json, std::string* output);

 private:
  struct CtxDeleter {
    void operator()(nft_ctx* c) const;
  };
  using Ctx = std::unique_ptr<nft_ctx, CtxDeleter>;
  static Ctx newContext(bool json);
  static constexpr size_t kFreshContextOps = 10000;
  RunResult run(nft_ctx* ctx, const std::string& buf);
  Ctx commitCtx_;  // JSON in/out; never lists
  Ctx checkCtx_;   // JSON, dry run: checks and probes, never applies
  Ctx listCtx_;    // JSON listings only
  Ctx nativeCtx_;  // native syntax: start-up declarations, table deletion
  WorkerThread worker_;  // every libnftables call runs here (see worker_thread.h); destroyed first
};

// The native text of the start-up declarations (table + typeof maps) of a ruleset.
std::string staticDeclarationsText(const Ruleset& rs);

}  // namespace kpn::nft
