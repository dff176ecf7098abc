// libFuzzer: render of random valid states, checked by the nft fake. The input is manifest text
// (YAML; the decoder keeps only valid objects, so every state is one the daemon could see). Three
// syncs, as the daemon runs them: the whole state, then every other object dropped, then the
// whole state again. Each must render, plan and commit to the fake kernel (which rejects jumps to
// missing chains, lookups of missing sets, deleting busy objects and re-adding a key with a new
// value), and an incremental plan must equal the plan of comparing every owner.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "nft/diff.h"
#include "nft/fake.h"
#include "pkg/api/decode.h"
#include "pkg/render/render.h"
#include "pkg/source/manifest_merge.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/planner.h"

namespace {

constexpr const char* kNode = "node1";

void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "render_fake: %s: %s\n", what, detail.c_str());
  std::abort();
}

kpn::api::DecodedObjects usable(kpn::api::DecodedObjects in, bool everyOther) {
  kpn::api::DecodedObjects out;
  size_t i = 0;
  auto keep = [&] { return !everyOther || (i++ % 2 == 0); };
  for (auto& s : in.services)
    if (keep()) out.services.push_back(std::move(s));
  for (auto& s : in.slices)
    if (!s.serviceName.empty() && keep()) out.slices.push_back(std::move(s));
  for (auto& n : in.nodes)
    if (n.meta.name == kNode) out.nodes.push_back(std::move(n));
  for (auto& c : in.serviceCIDRs)
    if (keep()) out.serviceCIDRs.push_back(std::move(c));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpn::api::DecodedObjects objs;
  std::string error;
  if (!kpn::api::decodeManifest(std::string_view(reinterpret_cast<const char*>(data), size), false, objs, &error))
    return 0;
  kpn::services::NodeConfig cfg;
  cfg.nodeName = kNode;
  kpn::services::parseClusterCidrs("10.244.0.0/16,fd00:10:244::/48", cfg);
  kpn::render::Renderer renderer(cfg);
  kpn::state::ClusterState st;
  kpn::source::ManifestMerge merge(st);
  kpn::nft::FakeRunner kernel;
  kpn::nft::Committed committed;
  const kpn::api::DecodedObjects steps[] = {usable(objs, false), usable(objs, true), usable(objs, false)};
  for (const auto& step : steps) {
    merge.setFile("fuzz.yaml", step);
    std::set<std::string> changed = st.takeChanges().services;
    bool first = committed.ruleset.tables.empty();
    if (first) kernel.declareStatic(renderer.skeleton());
    // The daemon's plan path (pkg/sync/planner.h), against what is committed.
    kpn::sync::PlanRequest req;
    req.changed = first ? nullptr : &changed;
    kpn::sync::PlannedSync planned =
        kpn::sync::renderAndPlan(renderer, st, req, kpn::sync::PlanBase::fromCommitted(committed));
    const kpn::nft::Ruleset& rs = planned.desired();
    const kpn::nft::Plan& plan = planned.plan;
    if (plan.txn.toJson() != kpn::nft::planIncremental(committed, rs).txn.toJson())
      fail("incremental plan differs from the full comparison", plan.txn.toText());
    auto r = kernel.commit(plan.txn);
    if (!r.ok) fail("the fake kernel rejected the plan", r.error + "\n" + plan.txn.toText());
    kpn::nft::applyCommitted(committed, rs, plan);
  }
  return 0;
}
