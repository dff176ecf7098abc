// The --manifests=DIR source: the Services, EndpointSlices and this node's Node found in the
// top-level *.yaml, *.yml and *.json files of a folder, kept up to date with inotify.
//
// Per file it remembers what the file last parsed to, so that a change costs in proportion to the
// changed file: a file that no longer parses keeps its previous objects (an editor's half-saved
// file must not take services down), a deleted or moved-out file drops its objects, and an object
// defined in several files comes from the first file in byte order of names. A missing folder is
// an empty one; the watch is re-added when it appears.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "pkg/source/manifest_merge.h"
#include "pkg/source/manifest_read.h"
#include "pkg/source/source.h"
#include "pkg/source/unique_fd.h"
#include "pkg/state/cluster_state.h"

namespace kpn::source {

class ManifestDir final : public Source {
 public:
  // `nodeName`: only the Node of that name is used (the --hostname-override value).
  // `retryInterval`: how often to look for the folder while it does not exist.
  ManifestDir(std::string dir, std::string nodeName, state::ClusterState& state,
              std::chrono::milliseconds retryInterval = std::chrono::seconds(2));
  ~ManifestDir();  // the fds close with their owners
  ManifestDir(const ManifestDir&) = delete;
  ManifestDir& operator=(const ManifestDir&) = delete;

  // Watch the folder and read every file in it. Returns true if the state changed.
  bool start() override;
  // Readable when there is something for processEvents to do (folder events, or time to look
  // for a missing folder again). Valid from construction on.
  int fd() const override { return epoll_.get(); }
  // Drains the pending events and re-reads just the files they name; never blocks. Returns true
  // if the state changed.
  bool processEvents() override;
  // A folder is complete as soon as it has been read (a missing folder is an empty one).
  bool hasSynced() const override { return true; }
  std::string describe() const override { return "manifest folder " + dir_; }
  std::vector<ResourceState> resourceStates() const override;
  // Reads the folder's files again (not the merged state, which holds only what is ours).
  ExcludedLookup lookupExcluded(const std::string& ns, const std::string& name) const override;

  // Objects skipped because they failed to decode or validate, since start (for a metric).
  uint64_t skippedObjects() const { return skipped_; }
  // Whether the folder exists and is being watched.
  bool watching() const { return wd_ >= 0; }
  const std::string& dir() const { return dir_; }

 private:
  bool tryWatch();
  bool rescan();
  // Re-reads one file (or drops it when it is gone or no longer a regular file).
  bool reload(const std::string& name);
  // Decodes, logs and counts what reading a file gave and merges it (or keeps or drops what
  // the file had).
  bool apply(ManifestFile& file);
  bool forgetEverything();
  void armRetryTimer(bool on);

  const std::string dir_;
  const std::string nodeName_;
  const std::chrono::milliseconds retryInterval_;
  ManifestMerge merge_;
  UniqueFd inotify_, timer_, epoll_;
  int wd_ = -1;
  bool missingLogged_ = false;
  uint64_t skipped_ = 0;
};

}  // namespace kpn::source
