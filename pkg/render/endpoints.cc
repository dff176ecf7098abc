#include "pkg/render/endpoints.h"

#include <algorithm>

namespace kpn::render {

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
};
void collect(const api::ServicePort& sp, const std::vector<const api::EndpointSlice*>& slices,
             const std::string& addressType, const std::string& nodeName, bool local, Collected& out) {
  for (const api::EndpointSlice* slice : slices) {
    if (slice->addressType != addressType) continue;
    const api::EndpointPort* match = nullptr;
    for (const auto& p : slice->ports)
      if (p.name == sp.name && p.protocol == sp.protocol && p.port) match = &p;
    if (!match) continue;
    for (const auto& ep : slice->endpoints) {
      if (ep.addresses.empty()) continue;
      // Upstream uses the first address only: all of an endpoint's addresses are one pod.
      const bool local = !nodeName.empty() && ep.nodeName == nodeName;
      EndpointChoice c{ep.addresses.front(), *match->port, local, local || nodeName.empty() || ep.nodeName.empty()};
      if (ep.conditions.isReady()) {
        out.ready.push_back(c);
        if (local && c.local) out.localReady.push_back(c);
      } else if (ep.conditions.isServing() && ep.conditions.isTerminating()) {
        out.fallback.push_back(c);
        if (local && c.local) out.localFallback.push_back(c);
      }
    }
  }
}

}  // namespace

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
                                 const std::string& addressType, const std::string& nodeName) {
  EndpointSets out;
  Collected c;
  collect(sp, slices, addressType, nodeName, !nodeName.empty(), c);
  out.cluster = c.ready.empty() ? std::move(c.fallback) : std::move(c.ready);
  out.local = c.localReady.empty() ? std::move(c.localFallback) : std::move(c.localReady);
  sortUnique(out.cluster);
  sortUnique(out.local);
  return out;
}

}  // namespace kpn::render
