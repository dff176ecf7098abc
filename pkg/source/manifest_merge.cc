#include "pkg/source/manifest_merge.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

namespace kpn::source {
namespace {

const char* kindName(const api::Service*) { return "Service"; }
const char* kindName(const api::EndpointSlice*) { return "EndpointSlice"; }
const char* kindName(const api::Node*) { return "Node"; }
const char* kindName(const api::ServiceCIDR*) { return "ServiceCIDR"; }

template <class T>
std::string keyOf(const T& o) {
  return o.meta.ns.empty() ? o.meta.name : o.meta.ns + "/" + o.meta.name;
}

// The file's objects as (key, object), sorted by key; a later duplicate within the file is
// dropped, so the file's first definition wins (as it would for the file's earlier documents).
template <class T>
std::vector<std::pair<std::string, std::shared_ptr<const T>>> keyed(std::vector<T>&& objs, const std::string& file) {
  std::vector<std::pair<std::string, std::shared_ptr<const T>>> out;
  out.reserve(objs.size());
  for (T& o : objs) {
    std::string key = keyOf(o);
    out.emplace_back(std::move(key), std::make_shared<const T>(std::move(o)));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto dup = std::unique(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return false;
    LOG(WARNING) << "manifests: " << file << ": " << kindName(static_cast<const T*>(nullptr)) << " " << b.first
                 << " is defined twice in the file; the first definition is used";
    return true;
  });
  out.erase(dup, out.end());
  return out;
}

}  // namespace

bool ManifestMerge::setFile(const std::string& file, api::DecodedObjects objs) {
  auto entry = files_.try_emplace(file).first;
  const std::string& name = entry->first;  // the stable copy the claims point to
  FileKeys& keys = entry->second;
  bool changed = update(services_, name, keys.services, keyed(std::move(objs.services), name));
  changed |= update(slices_, name, keys.slices, keyed(std::move(objs.slices), name));
  changed |= update(nodes_, name, keys.nodes, keyed(std::move(objs.nodes), name));
  changed |= update(serviceCIDRs_, name, keys.serviceCIDRs, keyed(std::move(objs.serviceCIDRs), name));
  return changed;
}

bool ManifestMerge::dropFile(const std::string& file) {
  auto it = files_.find(file);
  if (it == files_.end()) return false;
  bool changed = false;
  for (const std::string* key : it->second.services) changed |= unclaim(services_, *key, file);
  for (const std::string* key : it->second.slices) changed |= unclaim(slices_, *key, file);
  for (const std::string* key : it->second.nodes) changed |= unclaim(nodes_, *key, file);
  for (const std::string* key : it->second.serviceCIDRs) changed |= unclaim(serviceCIDRs_, *key, file);
  files_.erase(it);
  return changed;
}

bool ManifestMerge::dropAll() {
  bool changed = false;
  while (!files_.empty()) changed |= dropFile(files_.begin()->first);
  return changed;
}

size_t ManifestMerge::objectCount(const std::string& file) const {
  auto it = files_.find(file);
  if (it == files_.end()) return 0;
  return it->second.services.size() + it->second.slices.size() + it->second.nodes.size() +
         it->second.serviceCIDRs.size();
}

std::vector<std::string> ManifestMerge::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f.first);
  return out;
}

template <class T>
bool ManifestMerge::update(Claims<T>& claims, const std::string& file, std::vector<const std::string*>& keys,
                           std::vector<std::pair<std::string, std::shared_ptr<const T>>> objs) {
  // Walk the file's old keys and new objects side by side (both sorted): keys only in the old
  // list are released, everything in the new list is (re)claimed.
  bool changed = false;
  size_t i = 0;
  std::vector<const std::string*> next;
  next.reserve(objs.size());
  for (auto& [key, obj] : objs) {
    for (; i < keys.size() && *keys[i] < key; ++i) changed |= unclaim(claims, *keys[i], file);
    if (i < keys.size() && *keys[i] == key) ++i;
    auto claimed = claims.try_emplace(std::move(key)).first;
    next.push_back(&claimed->first);
    changed |= claim<T>(claimed, file, std::move(obj));
  }
  for (; i < keys.size(); ++i) changed |= unclaim(claims, *keys[i], file);
  keys = std::move(next);
  return changed;
}

template <class T>
bool ManifestMerge::claim(typename Claims<T>::iterator claimed, const std::string& file, std::shared_ptr<const T> obj) {
  const std::string& key = claimed->first;
  std::vector<Owner<T>>& owners = claimed->second;
  std::shared_ptr<const T> before = owners.empty() ? nullptr : owners.front().obj;
  auto it = std::lower_bound(owners.begin(), owners.end(), file,
                             [](const Owner<T>& o, const std::string& f) { return *o.file < f; });
  const bool inserted = it == owners.end() || *it->file != file;
  if (inserted) it = owners.insert(it, Owner<T>{&file, std::move(obj)});
  else it->obj = std::move(obj);
  const char* kind = kindName(static_cast<const T*>(nullptr));
  if (it != owners.begin()) {
    if (inserted)
      LOG(WARNING) << "manifests: " << file << ": " << kind << " " << key << " is ignored: " << *owners.front().file
                   << " defines it too and comes first in name order";
    return false;
  }
  if (inserted && owners.size() > 1)
    LOG(WARNING) << "manifests: " << file << ": " << kind << " " << key << " overrides the copy in " << *owners[1].file
                 << " (first file in name order wins)";
  return publish(before, it->obj);
}

template <class T>
bool ManifestMerge::unclaim(Claims<T>& claims, const std::string& key, const std::string& file) {
  auto cit = claims.find(key);
  if (cit == claims.end()) return false;
  auto& owners = cit->second;
  auto it = std::find_if(owners.begin(), owners.end(), [&](const Owner<T>& o) { return *o.file == file; });
  if (it == owners.end()) return false;
  bool wasWinner = it == owners.begin();
  std::shared_ptr<const T> before = std::move(it->obj);
  owners.erase(it);
  if (!wasWinner) return false;
  std::shared_ptr<const T> after;
  if (!owners.empty()) {
    after = owners.front().obj;
    LOG(INFO) << "manifests: " << kindName(static_cast<const T*>(nullptr)) << " " << key << " now comes from "
              << *owners.front().file << " (" << file << " no longer defines it)";
  } else {
    claims.erase(cit);  // `key` may be this claim's own key (a FileKeys pointer): not read after this
  }
  return publish(before, after);
}

bool ManifestMerge::publish(const std::shared_ptr<const api::Service>& before,
                            const std::shared_ptr<const api::Service>& after) {
  if (after) return state_.upsertService(after);
  return state_.deleteService(before->meta.ns, before->meta.name);
}

bool ManifestMerge::publish(const std::shared_ptr<const api::EndpointSlice>& before,
                            const std::shared_ptr<const api::EndpointSlice>& after) {
  bool changed = false;
  // The store files slices under their service: a slice whose service-name label changed must
  // leave its old service before it joins the new one.
  if (before && (!after || before->serviceName != after->serviceName))
    changed = state_.deleteSlice(before->meta.ns, before->serviceName, before->meta.name);
  if (after) changed |= state_.upsertSlice(after);
  return changed;
}

bool ManifestMerge::publish(const std::shared_ptr<const api::Node>&, const std::shared_ptr<const api::Node>& after) {
  return state_.setNode(after);
}

bool ManifestMerge::publish(const std::shared_ptr<const api::ServiceCIDR>& before,
                            const std::shared_ptr<const api::ServiceCIDR>& after) {
  if (after) return state_.upsertServiceCIDR(after);
  return state_.deleteServiceCIDR(before->meta.name);
}

}  // namespace kpn::source
