#include "pkg/sync/planner.h"

#include <chrono>

#include "pkg/sync/clock.h"

namespace kpn::sync {

namespace {

// Whether any table of `rs` is of a family outside `families`.
bool dropsFamilies(const nft::Ruleset& rs, const std::set<nft::Family>* families) {
  if (!families) return false;
  for (const nft::Table& t : rs.tables)
    if (!families->count(t.family)) return true;
  return false;
}

// The listing (aligned with the rendered tables, which follow the skeleton) reduced to the
// families the plan programs.
void keepFamilies(std::vector<nft::ListedTable>& listed, const nft::Ruleset& rendered,
                  const std::set<nft::Family>* families) {
  if (!families) return;
  std::vector<nft::ListedTable> kept;
  for (size_t i = 0; i < listed.size() && i < rendered.tables.size(); ++i)
    if (families->count(rendered.tables[i].family)) kept.push_back(std::move(listed[i]));
  listed = std::move(kept);
}

nft::Plan planAgainst(const PlanBase& base, const nft::Ruleset& desired, const std::set<std::string>* onlyOwners,
                      PlanKind* how) {
  switch (base.kind) {
    case PlanBase::Kind::Committed:
      *how = PlanKind::Incremental;
      return nft::planIncremental(*base.committed, desired, onlyOwners);
    case PlanBase::Kind::Declared: {
      // The only things a reconcile with nothing listed cannot add are the typeof maps, which
      // the declarations (made or printed first) hold.
      *how = PlanKind::Reconcile;
      nft::Plan p = nft::planReconcile({}, desired);
      p.needsFull = false;
      return p;
    }
    case PlanBase::Kind::Listed: {
      *how = PlanKind::Reconcile;
      nft::Plan p = nft::planReconcile(base.listed, desired);
      if (!p.needsFull) return p;
      break;
    }
    case PlanBase::Kind::ListedFull:
      break;
  }
  *how = PlanKind::Full;
  return nft::planFull(base.listed, desired);
}

}  // namespace

nft::Plan PlannedSync::planOf(const nft::Ruleset& trial) const {
  PlanKind ignored;
  return planAgainst(base, trial, owners(), &ignored);
}

void PlannedSync::leaveOut(const std::set<std::string>& owners) {
  filtered = withoutOwners(desired(), owners);
  plan = planOf(*filtered);
}

const nft::Ruleset& renderFor(render::Renderer& renderer, const state::ClusterState& st, const PlanRequest& req,
                              const PlanBase& base) {
  if (req.adoptSlots) renderer.adoptSlots(base.listed);
  return renderer.render(st, req.changed);
}

PlannedSync renderAndPlan(render::Renderer& renderer, const state::ClusterState& st, const PlanRequest& req,
                          PlanBase base) {
  PlannedSync out;
  auto tRender = std::chrono::steady_clock::now();
  out.rendered = &renderFor(renderer, st, req, base);
  out.renderMs = msSince(tRender);

  // Owners of the renderer's touched Parts; refused owners whose retry is due (or whose service
  // changed) join them, the others stay out.
  const std::set<std::string>* touched = renderer.touchedOwners();
  if (touched) out.onlyOwners = *touched;
  if (req.refused) {
    out.leftOut = req.refused->excluded(req.now, touched);
    if (out.onlyOwners)
      for (const auto& owner : req.refused->owners())
        if (!out.leftOut.count(owner)) out.onlyOwners->insert(owner);
  }
  if (dropsFamilies(*out.rendered, req.families) || (req.refused && !req.refused->empty()))
    out.filtered = withoutOwners(*out.rendered, out.leftOut, req.families);
  keepFamilies(base.listed, *out.rendered, req.families);
  out.base = std::move(base);

  auto tDiff = std::chrono::steady_clock::now();
  out.plan = planAgainst(out.base, out.desired(), out.owners(), &out.kind);
  out.diffMs = msSince(tDiff);
  return out;
}

}  // namespace kpn::sync
