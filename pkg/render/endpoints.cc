#include "pkg/render/endpoints.h"

#include <algorithm>

namespace kpn::render {

std::vector<EndpointChoice> usableEndpoints(const api::ServicePort& sp,
                                            const std::vector<const api::EndpointSlice*>& slices,
                                            const std::string& addressType, const std::string& nodeName) {
  std::vector<EndpointChoice> ready, fallback;
  for (const api::EndpointSlice* slice : slices) {
    if (slice->addressType != addressType) continue;
    const api::EndpointPort* match = nullptr;
    for (const auto& p : slice->ports)
      if (p.name == sp.name && p.protocol == sp.protocol && p.port) match = &p;
    if (!match) continue;
    for (const auto& ep : slice->endpoints) {
      if (ep.addresses.empty()) continue;
      // Upstream uses the first address only: all of an endpoint's addresses are one pod.
      EndpointChoice c{ep.addresses.front(), *match->port, !nodeName.empty() && ep.nodeName == nodeName};
      if (ep.conditions.isReady()) ready.push_back(c);
      else if (ep.conditions.isServing() && ep.conditions.isTerminating()) fallback.push_back(c);
    }
  }
  auto& chosen = ready.empty() ? fallback : ready;
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end(),
                           [](const EndpointChoice& a, const EndpointChoice& b) { return a.ip == b.ip && a.port == b.port; }),
               chosen.end());
  return std::move(chosen);
}

}  // namespace kpn::render
