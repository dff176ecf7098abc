// Joining a Service port with the endpoints of all its EndpointSlices, and choosing the usable
// ones, as upstream does: a service port matches the slice port with the same name and protocol;
// the endpoint's port number comes from the slice; ready endpoints are used, and only when there
// are none, the serving-and-terminating ones.
#pragma once

#include <string>
#include <vector>

#include "pkg/api/types.h"

namespace kpn::render {

struct EndpointChoice {
  std::string ip;  // canonical
  int32_t port = 0;
  bool local = false;
  // Its traffic passes this node, so it can reach itself through a service here (hairpin): on
  // this node, or without a nodeName (or we do not know our own name).
  bool hairpinHere = false;
  bool operator<(const EndpointChoice& o) const { return ip != o.ip ? ip < o.ip : port < o.port; }
  bool operator==(const EndpointChoice& o) const {
    return ip == o.ip && port == o.port && local == o.local && hairpinHere == o.hairpinHere;
  }
};

// All slices of one service; addressType "IPv4" or "IPv6" picks the family. Sorted, deduplicated.
std::vector<EndpointChoice> usableEndpoints(const api::ServicePort& port,
                                            const std::vector<const api::EndpointSlice*>& slices,
                                            const std::string& addressType, const std::string& nodeName);

// Upstream's split of a service port's endpoints by traffic policy: `cluster` as above; `local`
// the endpoints on this node, chosen the same way among them alone (ready local ones, else the
// serving-and-terminating local ones), so a node whose local pods are all terminating keeps
// serving Local-policy traffic with them while cluster traffic goes to ready pods elsewhere.
struct EndpointSets {
  std::vector<EndpointChoice> cluster, local;
};
EndpointSets categorizeEndpoints(const api::ServicePort& port, const std::vector<const api::EndpointSlice*>& slices,
                                 const std::string& addressType, const std::string& nodeName);

}  // namespace kpn::render
