#include "pkg/sync/transaction_estimate.h"

#include <algorithm>

namespace kpn::sync {

namespace {
// Services with no rules of ours: headless ones (StatefulSets' many endpoints) and ExternalName.
bool proxied(const api::Service& svc) { return !svc.headless && svc.type != "ExternalName"; }
}  // namespace

size_t operationsToFill(const state::ClusterState& st, const std::vector<nft::ListedTable>& listed) {
  size_t ops = 0;
  for (const auto& [key, svc] : st.services) {
    if (!proxied(*svc)) continue;
    ops += svc->ports.size();
    auto slices = st.slicesByService.find(key);
    if (slices == st.slicesByService.end()) continue;
    for (const auto& [name, slice] : slices->second) {
      size_t ready = 0;
      for (const api::Endpoint& ep : slice->endpoints) ready += ep.conditions.isReady();
      ops += ready * std::max<size_t>(1, slice->ports.size());
    }
  }
  size_t held = 0;
  for (const nft::ListedTable& t : listed)
    for (const auto& [name, set] : t.sets) held += set.elements.size();
  return ops > held ? ops - held : 0;
}

}  // namespace kpn::sync
