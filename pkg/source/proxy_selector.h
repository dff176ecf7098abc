// Which Services and EndpointSlices this proxy watches: upstream kube-proxy's label selector.
// The API source sends it to the server; the manifest source applies the same rule itself, so
// both sources agree on what is ours.
#pragma once

#include "pkg/api/types.h"

namespace kpn::source {

inline constexpr const char* kServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name";
inline constexpr const char* kHeadlessLabel = "service.kubernetes.io/headless";
// Objects that belong to another proxy, and headless ones, are not ours. `!key` matches objects
// without the label at all: any value, the empty one included, excludes the object.
inline constexpr const char* kProxyLabelSelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless";

inline bool excludedByProxySelector(const api::ObjectMeta& meta) {
  return meta.labels.count(kServiceProxyNameLabel) != 0 || meta.labels.count(kHeadlessLabel) != 0;
}

}  // namespace kpn::source
