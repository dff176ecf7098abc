// Shared test plumbing: the render -> plan -> fake-kernel loop the syncer runs, the comparison of
// an incremental render with a from-scratch one, and golden files.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nft/diff.h"
#include "nft/fake.h"
#include "pkg/render/render.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/planner.h"

namespace kpn::testing {

// Render, plan against what is committed, commit to the fake, remember it as committed.
struct FakePipeline {
  explicit FakePipeline(services::NodeConfig cfg) : renderer(std::move(cfg)) {}
  render::Renderer renderer;
  nft::FakeRunner kernel;
  nft::Committed committed;
  nft::Plan sync(state::ClusterState& st) {
    std::set<std::string> changed = st.takeChanges().services;
    bool first = committed.ruleset.tables.empty();
    if (first) kernel.declareStatic(renderer.skeleton());
    // The daemon's plan path (pkg/sync/planner.h), against what is committed.
    sync::PlanRequest req;
    req.changed = first ? nullptr : &changed;
    sync::PlannedSync planned = sync::renderAndPlan(renderer, st, req, sync::PlanBase::fromCommitted(committed));
    const nft::Ruleset& rs = planned.desired();
    // As the syncer does: after an incremental render, compare only the owners it touched. That
    // must plan exactly what comparing every owner plans.
    // No hint after a from-scratch render (the renderer may also choose one itself later, when
    // the Node changed what services see).
    if (first) CHECK(renderer.touchedOwners() == nullptr);
    auto& plan = planned.plan;
    CHECK(plan.txn.toJson() == nft::planIncremental(committed, rs).txn.toJson());
    auto r = kernel.commit(plan.txn);
    REQUIRE_MESSAGE(r.ok, r.error);
    nft::applyCommitted(committed, rs, plan);
    // After an incremental plan only the touched owners are taken over: that must leave exactly
    // the Parts (the same pointers) a copy of the whole ruleset would.
    REQUIRE(committed.ruleset.tables.size() == rs.tables.size());
    for (size_t t = 0; t < rs.tables.size(); ++t) {
      CHECK(committed.ruleset.tables[t].sets == rs.tables[t].sets);
      CHECK(committed.ruleset.tables[t].parts == rs.tables[t].parts);
    }
    return std::move(plan);
  }
  // Both families' tables as the fake kernel lists them: what a restarted daemon starts from.
  std::vector<nft::ListedTable> listBoth() {
    std::vector<nft::ListedTable> listed(2);
    kernel.list(nft::Family::IPv4, "kube-proxy", &listed[0]);
    kernel.list(nft::Family::IPv6, "kube-proxy", &listed[1]);
    return listed;
  }
};

// Every Part of `full` is in `inc` with equal content, and nothing else is.
inline void checkSameParts(const nft::Ruleset& inc, const nft::Ruleset& full, int step) {
  REQUIRE(inc.tables.size() == full.tables.size());
  for (size_t t = 0; t < inc.tables.size(); ++t) {
    REQUIRE(inc.tables[t].parts.size() == full.tables[t].parts.size());
    for (const auto& [owner, part] : full.tables[t].parts) {
      INFO("owner " << owner << " step " << step);
      REQUIRE(inc.tables[t].parts.count(owner) == 1);
      CHECK(*inc.tables[t].parts.at(owner) == *part);
    }
  }
}

// `text` must equal the file at `path` (relative to the repository root). After an intended
// change, regenerate with KPN_UPDATE_GOLDEN=1 build/unit-tests and review the diff of the file.
inline void checkGolden(const std::string& path, const std::string& text) {
  if (std::getenv("KPN_UPDATE_GOLDEN")) std::ofstream(path) << text;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing " << path << " (run the unit tests from the repository root)");
  std::stringstream golden;
  golden << in.rdbuf();
  CHECK(text == golden.str());
}

}  // namespace kpn::testing
