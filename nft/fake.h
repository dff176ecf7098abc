// An in-memory stand-in for the kernel's nftables, for unit tests without root. It applies
// transactions atomically and refuses what the kernel refuses: jumps to missing chains, lookups of
// missing sets, deleting what is absent or still referenced, re-adding a map key with a new value.
#pragma once

#include <map>
#include <set>
#include <string>

#include "nft/runner.h"

namespace kpn::nft {

class FakeRunner : public Runner {
 public:
  RunResult commit(const Transaction& txn) override;
  RunResult check(const Transaction& txn) override;
  RunResult probeFamily(Family f) override;
  RunResult declareStatic(const Ruleset& rs) override;
  RunResult list(Family f, const std::string& table, ListedTable* out) override;
  RunResult deleteTable(Family f, const std::string& table) override;
  std::optional<uint32_t> generation(std::string* error) override;
  std::optional<std::map<TableId, TableCounts>> tableCounts(const std::vector<TableId>& tables, std::string* error) override;
  void expectTransaction(size_t ops) override { announced.push_back(ops); }

  std::vector<size_t> announced;  // expectTransaction() calls, in order

  int commits = 0;         // successful non-empty commits
  int declarations = 0;    // declareStatic() calls (each one a transaction of its own)
  size_t lastOps = 0;      // operations in the last commit attempt
  bool failNext = false;   // the next commit fails as a kernel rejection would
  bool failAlways = false; // every commit fails so, until cleared
  int checks = 0;          // check() calls
  uint32_t gen = 1;        // the ruleset generation: each commit bumps it (a test may too)
  int fingerprintReads = 0;  // generation() calls
  bool fingerprintFails = false;
  // Chains the kernel refuses to add (as for a conflict only the kernel sees): any transaction
  // adding one of them fails, in commit() and check() alike.
  std::set<std::string> rejectChains;
  // Services ("ns/name") whose elements the kernel refuses to add (as for a key another agent's
  // element already holds): an element whose comment is "ns/name" or starts with "ns/name:"
  // fails the batch.
  std::set<std::string> rejectServiceElements;
  std::set<Family> unsupportedFamilies;  // probeFamily() fails for these

  struct FakeSet {
    SetDecl decl;
    std::map<std::string, std::pair<std::string, std::vector<std::string>>> elements;  // key -> (value, chain refs)
    std::map<std::string, std::string> comments;                                         // key -> comment, if any
  };
  struct FakeTable {
    std::map<std::string, std::optional<Hook>> chains;
    std::map<std::string, std::vector<Rule>> rules;
    std::map<std::string, FakeSet> sets;
    std::set<std::string> counters;  // named counter objects (declared by declareStatic)
  };
  std::map<std::string, FakeTable> tables;  // "ip kube-proxy"

 private:
  RunResult apply(std::map<std::string, FakeTable>& tables, const Op& op) const;
  bool refusesElement(const Element& e) const;
  RunResult applyAll(const Transaction& txn, std::map<std::string, FakeTable>& tables) const;
};

}  // namespace kpn::nft
