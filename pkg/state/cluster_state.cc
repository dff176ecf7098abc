#include "pkg/state/cluster_state.h"

namespace kpn::state {

std::string serviceKey(const std::string& ns, const std::string& name) { return ns + "/" + name; }

ClusterState::Changes ClusterState::takeChanges() {
  Changes out;
  out.services.swap(changedServices);
  out.node = nodeChanged;
  out.serviceCIDRs = serviceCIDRsChanged;
  nodeChanged = false;
  serviceCIDRsChanged = false;
  return out;
}

void ClusterState::serviceChanged(const std::string& key) {
  changeCounts.pendingServices.insert(key);
  ++changeCounts.serviceChanges;
}

void ClusterState::endpointsChanged(const std::string& key) {
  changeCounts.pendingEndpoints.insert(key);
  ++changeCounts.endpointChanges;
}

bool ClusterState::upsertService(ServicePtr svc) {
  auto key = serviceKey(svc->meta.ns, svc->meta.name);
  auto& slot = services[key];
  if (slot && *slot == *svc) return false;  // same content: keep the old pointer, nothing to re-render
  slot = std::move(svc);
  changedServices.insert(key);
  serviceChanged(key);
  return true;
}

bool ClusterState::deleteService(const std::string& ns, const std::string& name) {
  auto key = serviceKey(ns, name);
  if (!services.erase(key)) return false;
  changedServices.insert(key);
  serviceChanged(key);
  return true;
}

bool ClusterState::upsertSlice(SlicePtr slice) {
  auto key = serviceKey(slice->meta.ns, slice->serviceName);
  auto& slot = slicesByService[key][slice->meta.name];
  if (slot && *slot == *slice) return false;
  slot = std::move(slice);
  changedServices.insert(key);
  endpointsChanged(key);
  return true;
}

bool ClusterState::deleteSlice(const std::string& ns, const std::string& serviceName,
                               const std::string& sliceName) {
  auto key = serviceKey(ns, serviceName);
  auto it = slicesByService.find(key);
  if (it == slicesByService.end() || !it->second.erase(sliceName)) return false;
  if (it->second.empty()) slicesByService.erase(it);
  changedServices.insert(key);
  endpointsChanged(key);
  return true;
}

bool ClusterState::setNode(NodePtr n) {
  if ((node == nullptr) == (n == nullptr) && (!n || *node == *n)) return false;
  node = std::move(n);
  nodeChanged = true;
  return true;
}

bool ClusterState::upsertServiceCIDR(ServiceCIDRPtr cidr) {
  auto& slot = serviceCIDRs[cidr->meta.name];
  if (slot && *slot == *cidr) return false;
  slot = std::move(cidr);
  serviceCIDRsChanged = true;
  return true;
}

bool ClusterState::deleteServiceCIDR(const std::string& name) {
  if (!serviceCIDRs.erase(name)) return false;
  serviceCIDRsChanged = true;
  return true;
}

}  // namespace kpn::state
