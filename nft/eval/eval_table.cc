#include "nft/eval/eval_table.h"

namespace kpn::nft::eval {

EvalTable tableFromModel(const Table& t) {
  EvalTable out;
  out.family = t.family;
  out.name = t.name;
  for (const auto& decl : t.sets) out.sets[decl.name];
  for (const auto& [owner, part] : t.parts) {
    if (!part) continue;
    for (const auto& c : part->chains) {
      TableChain& tc = out.chains[c.name];
      tc.name = c.name;
      if (c.hook) tc.hook = c.hook;
      for (const auto& r : c.rules) tc.rules.push_back({r.exprJson, r.text, r.comment});
    }
    for (const auto& e : part->elements) {
      TableSet& ts = out.sets[e.set.str()];
      ts.elements.emplace_back(e.key(), e.value());
      if (!e.comment().empty()) ts.comments.emplace(e.key(), e.comment());
    }
  }
  return out;
}

EvalTable tableFromListing(Family family, const std::string& name, const ListedTable& t) {
  EvalTable out;
  out.family = family;
  out.name = name;
  for (const auto& [chainName, c] : t.chains) {
    TableChain& tc = out.chains[chainName];
    tc.name = chainName;
    tc.hook = c.hook;
    for (const auto& r : c.rules) tc.rules.push_back({r.exprJson, "", r.comment});
  }
  for (const auto& [setName, s] : t.sets) {
    TableSet& ts = out.sets[setName];
    for (const auto& [k, v] : s.elements) ts.elements.emplace_back(k, v);
    ts.comments = s.comments;
    ts.expires = s.expires;
  }
  return out;
}

}  // namespace kpn::nft::eval
