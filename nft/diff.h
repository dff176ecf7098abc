// Turning "what is committed" and "what we want" into one transaction.
//  - incremental: owner by owner; an unchanged part costs a pointer comparison, so a one-endpoint
//    change costs in proportion to the change, not to the cluster.
//  - reconcile: against what a listing found in the kernel (start-up): keeps what matches.
//  - full: flush and refill every chain and set of our tables, deleting stale objects; used after
//    a failed commit, when our picture of the kernel can no longer be trusted.
// Rules change only through flush chain + add rule (no handles: those force libnftables to fetch
// the whole ruleset), element values through delete + add of the key (re-adding a key with a new
// value fails in the kernel).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nft/element_index.h"
#include "nft/listing.h"
#include "nft/model.h"
#include "nft/transaction.h"

namespace kpn::nft {

// "family|table|set"
std::string indexSetKey(Family f, const std::string& table, const std::string& set);

struct Committed {
  Ruleset ruleset;
  ElementIndex elements;
};

struct Plan {
  Transaction txn;
  // Index updates to apply once the transaction committed (nullopt = erase).
  struct IndexDelta {
    std::string setKey, keyJson;
    std::optional<ElementRef> ref;
  };
  std::vector<IndexDelta> indexDeltas;
  bool rebuildIndex = false;  // reconcile/full plans: rebuild the index from the ruleset instead
  // Incremental plans from an incremental render: the only owners whose Parts may differ, so that
  // applyCommitted updates just those (copying 10k Parts' map after each one-endpoint change cost
  // more than the commit). nullopt: take over the whole ruleset.
  std::optional<std::set<std::string>> owners;
  // Reconcile only: the kernel holds something a targeted change cannot fix (a set of another
  // type, a base chain with another hook); the caller should run a full plan instead.
  bool needsFull = false;
};

// onlyOwners: when the caller knows which owners' Parts may differ (an incremental render), only
// those are compared; every other owner must hold the same Part in both rulesets. nullptr: all.
Plan planIncremental(const Committed& from, const Ruleset& to, const std::set<std::string>* onlyOwners = nullptr);
Plan planReconcile(const std::vector<ListedTable>& kernel, const Ruleset& to);
Plan planFull(const std::vector<ListedTable>& kernel, const Ruleset& to);

// Whether the listed tables (aligned with skeleton.tables) already hold what the start-up
// declarations make (staticDeclarationsText): each table of a family in `families`, with each of
// its typeof maps and data-path sets, as a reconcile would keep them. Then declaring them again
// would change nothing but the generation.
bool staticDeclarationsListed(const Ruleset& skeleton, const std::vector<ListedTable>& listed,
                              const std::set<Family>& families);

// After a successful commit of plan: `to` becomes the committed state.
void applyCommitted(Committed& c, const Ruleset& to, const Plan& plan);

// Every element of the ruleset with its reference count (for reconcile/full and tests).
ElementIndex buildIndex(const Ruleset& rs);

}  // namespace kpn::nft
