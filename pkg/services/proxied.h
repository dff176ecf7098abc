// Which Services this proxy programs. The sources watch with upstream kube-proxy's label
// selector: the API source sends it to the server; the manifest source applies the same rule
// itself, so both sources agree on what is ours. What passes it may still get no rules
// (serviceIsProxied): the rules, health checks, conntrack clean-up and metrics all ask that.
#pragma once

#include "pkg/api/types.h"
#include "pkg/services/node_config.h"

namespace kpn::services {

inline constexpr const char* kServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name";
inline constexpr const char* kHeadlessLabel = "service.kubernetes.io/headless";
// Objects that belong to another proxy, and headless ones, are not ours. `!key` matches objects
// without the label at all: any value, the empty one included, excludes the object.
inline constexpr const char* kProxyLabelSelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless";

inline bool excludedByProxySelector(const api::ObjectMeta& meta) {
  return meta.labels.count(kServiceProxyNameLabel) != 0 || meta.labels.count(kHeadlessLabel) != 0;
}

// Services that get no rules: headless, ExternalName, or handled by another proxy.
bool serviceIsProxied(const api::Service& svc, const NodeConfig& cfg);

}  // namespace kpn::services
