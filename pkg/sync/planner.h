// The one plan path: render the cluster state, then plan the difference against what we
// committed or against what the kernel listed. Pure: no kernel access (the caller lists and
// commits, pkg/sync/kernel_steps.h). The daemon's syncer, `--dry-run`, `trace` and the unit
// tests' fake pipeline all go through here, so each of them exercises the daemon's own path.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nft/diff.h"
#include "nft/listing.h"
#include "nft/model.h"
#include "pkg/render/render.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/clock.h"
#include "pkg/sync/isolation.h"

namespace kpn::sync {

// How a plan was made: from what we committed (the change journal's services), or by comparing
// with the listed kernel tables (at start-up, keeping what matches; after a failure or a
// declaration change, rebuilt).
enum class PlanKind { None, Incremental, Reconcile, Full };

// What a plan compares the desired ruleset with.
struct PlanBase {
  enum class Kind {
    Committed,   // what our last commit left (`committed`): an incremental plan
    Listed,      // the kernel's tables (`listed`): keep what matches; rebuilt when that cannot
    ListedFull,  // the kernel's tables (`listed`): flush and refill
    Declared,    // tables holding just the start-up declarations (a dry run): everything is added
  } kind = Kind::Declared;
  const nft::Committed* committed = nullptr;
  // Aligned with the renderer's skeleton (one entry per family); families left out of the plan
  // are dropped from it here.
  std::vector<nft::ListedTable> listed;

  static PlanBase fromCommitted(const nft::Committed& c) { return {Kind::Committed, &c, {}}; }
  static PlanBase fromListing(std::vector<nft::ListedTable> aligned, bool full) {
    return {full ? Kind::ListedFull : Kind::Listed, nullptr, std::move(aligned)};
  }
  static PlanBase declaredOnly() { return {}; }
};

struct PlanRequest {
  // Service keys changed since the last render; nullptr: every service is rendered again.
  const std::set<std::string>* changed = nullptr;
  // Start-up: take over the endpoint slots the listed tables hold before rendering.
  bool adoptSlots = false;
  // The families programmed; nullptr: all of them.
  const std::set<nft::Family>* families = nullptr;
  // Services the kernel refused (isolation.h): left out until due, compared again when due.
  const RetryBook* refused = nullptr;
  SteadyTime now{};
};

struct PlannedSync {
  const nft::Ruleset* rendered = nullptr;  // the renderer's, valid until its next render
  // `rendered` without the left-out owners and the families not programmed, when there are any.
  std::optional<nft::Ruleset> filtered;
  std::set<std::string> leftOut;  // refused owners not yet due
  // After an incremental render: the owners the plan compares (the renderer's touched ones and
  // the refused ones due again); nullopt: every owner.
  std::optional<std::set<std::string>> onlyOwners;
  PlanBase base;  // as given, its listing reduced to the programmed families
  nft::Plan plan;
  PlanKind kind = PlanKind::None;
  double renderMs = 0, diffMs = 0;

  const nft::Ruleset& desired() const { return filtered ? *filtered : *rendered; }
  const std::set<std::string>* owners() const { return onlyOwners ? &*onlyOwners : nullptr; }
  // The plan of `trial` (the desired ruleset without some owners) against the same base.
  nft::Plan planOf(const nft::Ruleset& trial) const;
  // Leaves `owners` out as well and plans again.
  void leaveOut(const std::set<std::string>& owners);
};

// The render step alone: adopt the slots of base.listed when asked, then render. For a caller
// that wants the desired ruleset and no plan (trace).
const nft::Ruleset& renderFor(render::Renderer& renderer, const state::ClusterState& st, const PlanRequest& req,
                              const PlanBase& base);

// Render, leave out what `req` says, plan against `base`.
PlannedSync renderAndPlan(render::Renderer& renderer, const state::ClusterState& st, const PlanRequest& req,
                          PlanBase base);

}  // namespace kpn::sync
