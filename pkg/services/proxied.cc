#include "pkg/services/proxied.h"

namespace kpn::services {

bool serviceIsProxied(const api::Service& svc, const NodeConfig& cfg) {
  if (svc.headless || svc.type == "ExternalName") return false;
  // Any value of the label (the empty one too) hands the service to another proxy, as upstream's
  // label selector does; the sources filter these out already.
  if (svc.meta.labels.count(kServiceProxyNameLabel)) return false;
  return !svc.clusterIPs.empty();
}

}  // namespace kpn::services
