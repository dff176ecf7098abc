#include "pkg/source/manifest_dir.h"

#include <dirent.h>
#include <glog/logging.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <system_error>

#include "pkg/api/skip_report.h"
#include "pkg/services/proxied.h"

namespace kpn::source {
namespace {

// IN_CLOSE_WRITE rather than IN_MODIFY: a file is read once its writer is done with it.
// IN_CREATE only matters for links (see createdWhole). The *_SELF events tell that the folder
// itself went away.
constexpr uint32_t kWatchMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

// Kubernetes ConfigMap/Secret volumes publish an update by swapping the "..data" symlink that
// every visible file points through: the visible names see no event at all, so the swap means
// "everything may have changed".
constexpr const char* kAtomicWriterDataLink = "..data";

UniqueFd checked(int fd, const char* what) {
  if (fd < 0) throw std::system_error(errno, std::generic_category(), what);
  return UniqueFd(fd);
}

// A file created in the folder is normally still being written: its IN_CLOSE_WRITE will come.
// A symlink or a new hard link to an existing file is whole at once and sends no IN_CLOSE_WRITE.
bool createdWhole(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return false;
  return S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink > 1);
}

}  // namespace

ManifestDir::ManifestDir(std::string dir, std::string nodeName, state::ClusterState& state,
                         std::chrono::milliseconds retryInterval)
    : dir_(std::move(dir)),
      nodeName_(std::move(nodeName)),
      retryInterval_(std::max(retryInterval, std::chrono::milliseconds(1))),
      merge_(state),
      inotify_(checked(inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")),
      timer_(checked(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), "timerfd_create")),
      epoll_(checked(epoll_create1(EPOLL_CLOEXEC), "epoll_create1")) {
  // One fd for the daemon's loop to poll: the epoll fd is readable whenever the inotify fd has
  // events or the retry timer has expired.
  for (int fd : {inotify_.get(), timer_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      throw std::system_error(errno, std::generic_category(), "epoll_ctl");
  }
}

ManifestDir::~ManifestDir() = default;

bool ManifestDir::start() {
  if (!tryWatch()) return forgetEverything();
  bool changed = rescan();
  size_t objects = 0;
  std::vector<std::string> files = merge_.files();
  for (const auto& f : files) objects += merge_.objectCount(f);
  LOG(INFO) << "manifests: " << dir_ << ": " << files.size() << " files, " << objects << " objects";
  return changed;
}

bool ManifestDir::tryWatch() {
  int wd = inotify_add_watch(inotify_.get(), dir_.c_str(), kWatchMask);
  if (wd < 0) {
    if (!missingLogged_)
      LOG(WARNING) << "manifests: folder " << dir_ << ": " << std::strerror(errno)
                   << "; no services from it until it is there (checking every " << retryInterval_.count() << " ms)";
    missingLogged_ = true;
    armRetryTimer(true);
    return false;
  }
  if (missingLogged_) LOG(INFO) << "manifests: folder " << dir_ << " is there now";
  missingLogged_ = false;
  wd_ = wd;
  armRetryTimer(false);
  return true;
}

void ManifestDir::armRetryTimer(bool on) {
  itimerspec spec{};
  if (on) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(retryInterval_).count();
    spec.it_value.tv_sec = ns / 1000000000;
    spec.it_value.tv_nsec = ns % 1000000000;
    spec.it_interval = spec.it_value;
  }
  if (timerfd_settime(timer_.get(), 0, &spec, nullptr) != 0) PLOG(ERROR) << "manifests: timerfd_settime";
}

bool ManifestDir::rescan() {
  // The watch is in place before the listing, so a file written meanwhile is not missed: at
  // worst it is read twice.
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir_.c_str()), closedir);
  if (!d) {
    PLOG(WARNING) << "manifests: cannot list " << dir_;
    return forgetEverything();
  }
  std::set<std::string> present;
  errno = 0;
  while (const dirent* e = readdir(d.get())) {
    std::string name = e->d_name;
    if (isManifestFileName(name)) present.insert(std::move(name));
  }
  bool changed = false;
  for (const auto& f : merge_.files())
    if (!present.count(f)) changed |= merge_.dropFile(f);
  // Reading and parsing is most of a full read: the files are read and parsed on several
  // threads, and decoded and applied here one by one in name order, as if read one by one.
  readManifestFiles(dir_, {present.begin(), present.end()}, manifestReadThreads(),
                    [&](ManifestFile& f) { changed |= apply(f); });
  return changed;
}

bool ManifestDir::reload(const std::string& name) {
  ManifestFile file = readManifestFile(dir_, name);
  return apply(file);
}

bool ManifestDir::apply(ManifestFile& file) {
  const std::string& name = file.name;
  switch (file.outcome) {
    case ManifestFile::Outcome::kGone:
      if (merge_.hasFile(name))
        LOG(INFO) << "manifests: " << name << " is gone; dropping its " << merge_.objectCount(name) << " objects";
      return merge_.dropFile(name);
    case ManifestFile::Outcome::kReadError:
      LOG(WARNING) << "manifests: " << name << ": " << std::strerror(file.readErrno) << "; keeping the "
                   << merge_.objectCount(name) << " objects it had";
      return false;
    case ManifestFile::Outcome::kSyntaxError:
      LOG(WARNING) << "manifests: " << name << ": " << file.syntaxError << "; keeping the " << merge_.objectCount(name)
                   << " objects it had";
      return false;
    case ManifestFile::Outcome::kParsed:
      break;
  }

  api::DecodedObjects objs;
  api::decodeParsedManifest(file.parsed, objs);
  for (const auto& e : objs.errors) {
    LOG(WARNING) << "manifests: " << name << ": " << e << " (skipped)";
    api::reportSkippedError(e);
  }
  skipped_ += objs.errors.size();
  for (const auto& w : objs.warnings) LOG(WARNING) << "manifests: " << name << ": " << w;

  // A slice without the label belongs to no service (the store files slices by service).
  auto unlabelled = std::remove_if(objs.slices.begin(), objs.slices.end(), [&](const api::EndpointSlice& s) {
    if (!s.serviceName.empty()) return false;
    LOG(WARNING) << "manifests: " << name << ": EndpointSlice " << s.meta.ns << "/" << s.meta.name
                 << " has no kubernetes.io/service-name label; ignored";
    api::reportSkipped("EndpointSlice", "no_service_name");
    return true;
  });
  objs.slices.erase(unlabelled, objs.slices.end());
  // What the API source's label selector leaves out is left out here too.
  auto notOurs = [&](const char* kind, const api::ObjectMeta& meta) {
    if (!services::excludedByProxySelector(meta)) return false;
    VLOG(2) << "manifests: " << name << ": " << kind << " " << meta.ns << "/" << meta.name
            << " is labelled for another proxy or as headless; not ours";
    return true;
  };
  objs.services.erase(std::remove_if(objs.services.begin(), objs.services.end(),
                                     [&](const api::Service& s) { return notOurs("Service", s.meta); }),
                      objs.services.end());
  objs.slices.erase(std::remove_if(objs.slices.begin(), objs.slices.end(),
                                   [&](const api::EndpointSlice& s) { return notOurs("EndpointSlice", s.meta); }),
                    objs.slices.end());
  // Other nodes' Node objects are of no use to this node's proxy.
  objs.nodes.erase(std::remove_if(objs.nodes.begin(), objs.nodes.end(),
                                  [&](const api::Node& n) { return n.meta.name != nodeName_; }),
                   objs.nodes.end());
  return merge_.setFile(name, std::move(objs));
}

std::vector<ResourceState> ManifestDir::resourceStates() const {
  return {{"folder", true, watching() ? "" : "folder " + dir_ + " is missing"}};
}

ExcludedLookup ManifestDir::lookupExcluded(const std::string& ns, const std::string& name) const {
  ExcludedLookup out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir_.c_str()), closedir);
  if (!d) {
    out.error = "cannot list " + dir_ + ": " + std::strerror(errno);
    return out;
  }
  out.asked = true;
  while (const dirent* e = readdir(d.get())) {
    std::string fileName = e->d_name;  // not `name`: that is the Service's
    if (!isManifestFileName(fileName)) continue;
    ManifestFile file = readManifestFile(dir_, fileName);
    if (file.outcome != ManifestFile::Outcome::kParsed) continue;
    api::DecodedObjects objs;
    api::decodeParsedManifest(file.parsed, objs);
    for (auto& svc : objs.services)
      if (svc.meta.ns == ns && svc.meta.name == name && services::excludedByProxySelector(svc.meta))
        out.service = std::move(svc);
  }
  return out;
}

bool ManifestDir::forgetEverything() {
  std::vector<std::string> files = merge_.files();
  if (files.empty()) return false;
  LOG(WARNING) << "manifests: folder " << dir_ << " is gone; dropping the objects of its " << files.size()
               << " files";
  return merge_.dropAll();
}

bool ManifestDir::processEvents() {
  uint64_t expirations;
  if (read(timer_.get(), &expirations, sizeof expirations) < 0 && errno != EAGAIN)
    PLOG(ERROR) << "manifests: reading the retry timer";

  bool rescanAll = false, lost = false;
  std::set<std::string> names;  // sorted and deduplicated: a file saved twice is read once
  alignas(inotify_event) char buf[64 * 1024];
  while (true) {
    ssize_t n = read(inotify_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) PLOG(ERROR) << "manifests: reading inotify events";
      break;
    }
    if (n == 0) break;
    for (char* p = buf; p < buf + n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {  // events were lost: only a full look is safe
        rescanAll = true;
        continue;
      }
      if (wd_ < 0 || ev->wd != wd_) continue;  // a watch we already gave up
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED)) {
        lost = true;
        continue;
      }
      if (ev->len == 0) continue;
      std::string name(ev->name);  // NUL-padded to ev->len
      if (name == kAtomicWriterDataLink && (ev->mask & (IN_MOVED_TO | IN_CREATE))) {
        rescanAll = true;
        continue;
      }
      if (!isManifestFileName(name)) continue;
      if ((ev->mask & IN_CREATE) && !createdWhole(dir_ + "/" + name)) continue;
      names.insert(std::move(name));
    }
  }

  if (lost) {
    // A moved folder keeps its watch; drop it so that the name is what we watch, not the inode.
    inotify_rm_watch(inotify_.get(), wd_);
    wd_ = -1;
  }
  if (wd_ < 0) {
    if (!tryWatch()) return forgetEverything();
    rescanAll = true;
  }
  if (rescanAll) return rescan();
  bool changed = false;
  for (const auto& name : names) changed |= reload(name);
  return changed;
}

}  // namespace kpn::source
