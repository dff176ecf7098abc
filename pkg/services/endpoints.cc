#include "pkg/services/endpoints.h"

#include <algorithm>

namespace kpn::services {

namespace {

void sortUnique(std::vector<EndpointChoice>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end(),
                      [](const EndpointChoice& a, const EndpointChoice& b) { return a.ip == b.ip && a.port == b.port; }),
          v.end());
}

// Ready endpoints, and serving-and-terminating ones (the fallback); with `local`, also the local
// ones of each kind (one pass).
struct Collected {
  std::vector<EndpointChoice> ready, fallback, localReady, localFallback;
  std::vector<const api::Endpoint*> readyFrom;  // the endpoint of each `ready` entry (its hints)
};
void collect(const api::ServicePort& sp, const std::vector<const api::EndpointSlice*>& slices,
             const std::string& addressType, const std::string& nodeName, bool local, Collected& out) {
  forEachEndpointOfPort(sp, slices, addressType, [&](const api::Endpoint& ep, int32_t port) {
    // Upstream uses the first address only: all of an endpoint's addresses are one pod.
    const bool onThisNode = !nodeName.empty() && ep.nodeName == nodeName;
    EndpointChoice c{ep.address, port, onThisNode, onThisNode || nodeName.empty() || ep.nodeName.empty()};
    if (takesNewConnections(ep.conditions)) {
      out.ready.push_back(c);
      out.readyFrom.push_back(&ep);
      if (local && c.local) out.localReady.push_back(c);
    } else if (takesConnectionsWhileTerminating(ep.conditions)) {
      out.fallback.push_back(c);
      if (local && c.local) out.localFallback.push_back(c);
    }
  });
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Upstream's topologyModeFromHints over the ready endpoints.
std::string topologyMode(const Collected& c, const std::string& nodeName, const std::string& zone) {
  if (c.readyFrom.empty()) return "";
  bool allNodeHints = true, forNode = false, allZoneHints = true, forZone = false;
  for (const api::Endpoint* ep : c.readyFrom) {
    if (ep->hintNodes().empty()) allNodeHints = false;
    else if (!nodeName.empty() && has(ep->hintNodes(), nodeName)) forNode = true;
    if (ep->hintZones().empty()) allZoneHints = false;
    else if (!zone.empty() && has(ep->hintZones(), zone)) forZone = true;
  }
  if (allNodeHints && forNode) return "PreferSameNode";
  if (allZoneHints && forZone) return "PreferSameZone";
  return "";
}

std::vector<EndpointChoice> readyForTopology(const Collected& c, const std::string& mode, const std::string& nodeName,
                                             const std::string& zone) {
  if (mode.empty()) return c.ready;
  std::vector<EndpointChoice> out;
  for (size_t i = 0; i < c.ready.size(); ++i) {
    const api::Endpoint& ep = *c.readyFrom[i];
    if (mode == "PreferSameNode" ? has(ep.hintNodes(), nodeName) : has(ep.hintZones(), zone)) out.push_back(c.ready[i]);
  }
  return out;
}

}  // namespace

const api::EndpointPort* slicePortFor(const api::EndpointSlice& slice, const api::ServicePort& sp) {
  const api::EndpointPort* match = nullptr;
  for (const auto& p : slice.ports)
    if (p.name == sp.name && p.protocol == sp.protocol && p.port) match = &p;
  return match;
}

std::vector<const api::EndpointSlice*> slicesOf(const state::ClusterState& st, const std::string& serviceKey) {
  std::vector<const api::EndpointSlice*> out;
  if (auto it = st.slicesByService.find(serviceKey); it != st.slicesByService.end())
    for (const auto& [name, slice] : it->second) out.push_back(slice.get());
  return out;
}

std::vector<EndpointChoice> usableEndpoints(const api::ServicePort& sp,
                                            const std::vector<const api::EndpointSlice*>& slices,
                                            const std::string& addressType, const std::string& nodeName) {
  Collected c;
  collect(sp, slices, addressType, nodeName, false, c);
  auto& chosen = c.ready.empty() ? c.fallback : c.ready;
  sortUnique(chosen);
  return std::move(chosen);
}

EndpointSets categorizeEndpoints(const api::ServicePort& sp, const std::vector<const api::EndpointSlice*>& slices,
                                 const std::string& addressType, const std::string& nodeName,
                                 const std::string& zone) {
  EndpointSets out;
  Collected c;
  collect(sp, slices, addressType, nodeName, !nodeName.empty(), c);
  out.topology = topologyMode(c, nodeName, zone);
  // A mode is only chosen when some ready endpoint is hinted for us, so this is never empty
  // while ready endpoints exist.
  out.cluster = c.ready.empty() ? std::move(c.fallback) : readyForTopology(c, out.topology, nodeName, zone);
  out.local = c.localReady.empty() ? std::move(c.localFallback) : std::move(c.localReady);
  sortUnique(out.cluster);
  sortUnique(out.local);
  return out;
}

}  // namespace kpn::services
