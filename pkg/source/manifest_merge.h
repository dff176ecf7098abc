// The objects of a set of manifest files merged into one ClusterState. An object (kind +
// namespace/name) defined by several files comes from the file first in byte order of file
// names; when that file stops defining it, the next file's copy takes over. Pure bookkeeping, no
// I/O: ManifestDir feeds it one file at a time, and the cost of a file's update is proportional to
// that file's objects, never to the whole set.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pkg/api/decode.h"
#include "pkg/state/cluster_state.h"

namespace kpn::source {

class ManifestMerge {
 public:
  explicit ManifestMerge(state::ClusterState& state) : state_(state) {}

  // Everything `file` defines is now `objs` (services, slices, nodes and ServiceCIDRs; errors/warnings are
  // ignored). Slices must carry a serviceName; nodes should already be narrowed to this node.
  // Within one file the first definition of an object wins. Returns true if the state changed.
  bool setFile(const std::string& file, api::DecodedObjects objs);
  // The file is gone: its objects go, or fall back to the next file defining them.
  bool dropFile(const std::string& file);
  // Drops every file (the folder is gone).
  bool dropAll();

  bool hasFile(const std::string& file) const { return files_.count(file) != 0; }
  size_t objectCount(const std::string& file) const;
  std::vector<std::string> files() const;

 private:
  // Files are named by a pointer to their name in files_ (stable while the file is there, and
  // a file leaves files_ only after it has released every claim): at 10k services, one string per
  // claim was megabytes of copies of a few file names.
  template <class T>
  struct Owner {
    const std::string* file;
    std::shared_ptr<const T> obj;
  };
  // One object kind's claims: object key -> the files defining it with their copies, in file
  // name order (almost always just one). The first is the winner, the copy the store holds.
  template <class T>
  using Claims = std::map<std::string, std::vector<Owner<T>>>;
  // The keys one file defines, per kind, sorted: pointers to the keys of the claims (a claim
  // lives as long as this file holds it).
  struct FileKeys {
    std::vector<const std::string*> services, slices, nodes, serviceCIDRs;
  };

  template <class T>
  bool update(Claims<T>& claims, const std::string& file, std::vector<const std::string*>& keys,
              std::vector<std::pair<std::string, std::shared_ptr<const T>>> objs);
  template <class T>
  bool claim(typename Claims<T>::iterator claimed, const std::string& file, std::shared_ptr<const T> obj);
  template <class T>
  bool unclaim(Claims<T>& claims, const std::string& key, const std::string& file);

  // Put the winning copy into the store (or remove the object when no file defines it any more).
  bool publish(const std::shared_ptr<const api::Service>& before, const std::shared_ptr<const api::Service>& after);
  bool publish(const std::shared_ptr<const api::EndpointSlice>& before,
               const std::shared_ptr<const api::EndpointSlice>& after);
  bool publish(const std::shared_ptr<const api::Node>& before, const std::shared_ptr<const api::Node>& after);
  bool publish(const std::shared_ptr<const api::ServiceCIDR>& before,
               const std::shared_ptr<const api::ServiceCIDR>& after);

  state::ClusterState& state_;
  std::map<std::string, FileKeys> files_;
  Claims<api::Service> services_;
  Claims<api::EndpointSlice> slices_;
  Claims<api::Node> nodes_;
  Claims<api::ServiceCIDR> serviceCIDRs_;
};

}  // namespace kpn::source
