#include "pkg/source/api_source.h"

#include <glog/logging.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

namespace kpn::source {
namespace {

void splitKey(const std::string& key, std::string& ns, std::string& name) {
  auto slash = key.find('/');
  ns = key.substr(0, slash);
  name = key.substr(slash + 1);
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parseRfc3339(const std::string& s) {
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  auto t = std::chrono::system_clock::from_time_t(timegm(&tm));
  if (*rest == '.') {
    double frac = 0, scale = 0.1;
    for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10) frac += (*rest - '0') * scale;
    t += std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(frac));
  }
  if (*rest == 'Z' && rest[1] == '\0') return t;
  int hh = 0, mm = 0;
  char sign = *rest;
  if ((sign == '+' || sign == '-') && std::sscanf(rest + 1, "%2d:%2d", &hh, &mm) == 2) {
    auto off = std::chrono::hours(hh) + std::chrono::minutes(mm);
    return sign == '+' ? t - off : t + off;
  }
  return std::nullopt;
}

ApiSource::ApiSource(std::unique_ptr<kube::Transport> transport, std::string nodeName, state::ClusterState& state,
                     kube::ReflectorOptions opts)
    : transport_(std::move(transport)), nodeName_(std::move(nodeName)), state_(state) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  wake_ = UniqueFd(fd);
  auto make = [&](Resource r, kube::ResourceSpec spec) {
    reflectors_[r] = std::make_unique<kube::Reflector>(
        *transport_, std::move(spec),
        [this, r](std::vector<kube::Delta>&& d, bool listed) { enqueue(r, std::move(d), listed); }, opts);
  };
  make(kServices, {"Service", "/api/v1/services", services::kProxyLabelSelector, ""});
  make(kSlices, {"EndpointSlice", "/apis/discovery.k8s.io/v1/endpointslices", services::kProxyLabelSelector, ""});
  make(kNode, {"Node", "/api/v1/nodes", "", "metadata.name=" + nodeName_});
  make(kServiceCIDRs, {"ServiceCIDR", "/apis/networking.k8s.io/v1/servicecidrs", "", "", /*optional=*/true});
}

ApiSource::~ApiSource() {
  for (auto& r : reflectors_) r->stop();
  transport_->cancel();
  for (auto& t : threads_) t.join();
}

bool ApiSource::start() {
  for (auto& r : reflectors_) threads_.emplace_back([&r] { r->run(); });
  return false;
}

void ApiSource::enqueue(Resource r, std::vector<kube::Delta>&& deltas, bool listed) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back({r, std::move(deltas), listed});
  }
  uint64_t one = 1;
  ssize_t n = write(wake_.get(), &one, sizeof one);
  (void)n;  // EAGAIN means the counter is already non-zero: the main loop will wake anyway
}

bool ApiSource::apply(Resource r, kube::Delta& d) {
  std::string ns, name;
  splitKey(d.key, ns, name);
  switch (r) {
    case kServices:
      return d.deleted ? state_.deleteService(ns, name) : state_.upsertService(std::get<state::ServicePtr>(d.object));
    case kSlices: {
      auto known = sliceService_.find(d.key);
      bool changed = false;
      if (d.deleted) {
        if (known != sliceService_.end()) {
          changed = state_.deleteSlice(ns, known->second, name);
          sliceService_.erase(known);
        }
        return changed;
      }
      const auto& slice = std::get<state::SlicePtr>(d.object);
      // A slice relabelled to another service leaves the old one.
      if (known != sliceService_.end() && known->second != slice->serviceName)
        changed = state_.deleteSlice(ns, known->second, name);
      sliceService_[d.key] = slice->serviceName;
      // As upstream's endpoints change tracker: a trigger time from before this source started is
      // a change made before a restart (the initial list carries every slice's last one), not
      // one this daemon's sync programs; observing it would put hours into the latency histogram.
      auto trig = slice->meta.annotations.find(kube::kLastChangeTriggerTime);
      if (trig != slice->meta.annotations.end())
        if (auto t = parseRfc3339(trig->second); t && *t > startedAt_) {
          auto key = state::serviceKey(ns, slice->serviceName);
          auto it = triggers_.find(key);
          if (it == triggers_.end() || *t < it->second) triggers_[key] = *t;
        }
      return state_.upsertSlice(slice) || changed;
    }
    case kNode:
      // The field selector sends only this node; the name check guards against a server that
      // ignores it.
      if (name != nodeName_) return false;
      return state_.setNode(d.deleted ? nullptr : std::get<state::NodePtr>(d.object));
    case kServiceCIDRs:
      return d.deleted ? state_.deleteServiceCIDR(name)
                       : state_.upsertServiceCIDR(std::get<state::ServiceCIDRPtr>(d.object));
    default:
      return false;
  }
}

bool ApiSource::processEvents() {
  uint64_t count;
  while (read(wake_.get(), &count, sizeof count) > 0) {
  }
  std::vector<Batch> batches;
  {
    std::lock_guard<std::mutex> lk(mu_);
    batches.swap(queue_);
  }
  bool changed = false;
  for (auto& b : batches) {
    for (auto& d : b.deltas) changed |= apply(b.resource, d);
    if (b.listed && !listed_[b.resource]) {
      listed_[b.resource] = true;
      LOG(INFO) << reflectors_[b.resource]->spec().kind << "s listed from " << transport_->server();
      if (!requiredListedAt_ && listed_[kServices] && listed_[kSlices])
        requiredListedAt_ = std::chrono::steady_clock::now();
    }
  }
  return changed;
}

// Upstream's rule: Services and EndpointSlices gate the first sync; the Node and ServiceCIDRs
// only refine it (after a short grace, see requiredListedAt_).
bool ApiSource::hasSynced() const {
  if (!requiredListedAt_) return false;
  if (pending().empty()) return true;
  if (std::chrono::steady_clock::now() - *requiredListedAt_ < kRefinementGrace) return false;
  if (!refinementWarned_) {
    refinementWarned_ = true;
    LOG(WARNING) << "syncing before " << pending() << " listed: the rules that depend on them (NodePort "
                    "addresses, local pod detection by node CIDR, unallocated ClusterIPs) follow once they do";
  }
  return true;
}

std::string ApiSource::pending() const {
  std::string s;
  for (int r = 0; r < kResources; r++)
    if (!listed_[r]) s += (s.empty() ? "" : ", ") + reflectors_[r]->spec().kind + "s";
  return s;
}

uint64_t ApiSource::skippedObjects() const {
  uint64_t n = 0;
  for (const auto& r : reflectors_) n += r->stats().skippedObjects;
  return n;
}

std::map<std::string, std::chrono::system_clock::time_point> ApiSource::takeTriggerTimes() {
  return std::exchange(triggers_, {});
}

std::string ApiSource::describe() const { return "API server " + transport_->server(); }

std::vector<ResourceState> ApiSource::resourceStates() const {
  std::vector<ResourceState> out;
  for (int r = 0; r < kResources; r++)
    out.push_back({reflectors_[r]->spec().kind + "s", listed_[r], reflectors_[r]->lastError()});
  return out;
}

ExcludedLookup ApiSource::lookupExcluded(const std::string& ns, const std::string& name) const {
  ExcludedLookup out;
  kube::HttpResult r = transport_->get("/api/v1/namespaces/" + kube::queryEscape(ns) +
                                       "/services?fieldSelector=" + kube::queryEscape("metadata.name=" + name));
  if (r.status != 200) {
    out.error = r.status ? "HTTP " + std::to_string(r.status) : r.error;
    return out;
  }
  kube::ListPage page;
  if (auto err = kube::decodeListPage(r.body, "Service", page)) {
    out.error = *err;
    return out;
  }
  out.asked = true;
  for (auto& item : page.items)
    if (item.error.empty() && item.key == ns + "/" + name) {
      const auto& svc = std::get<state::ServicePtr>(item.object);
      if (services::excludedByProxySelector(svc->meta)) out.service = *svc;
    }
  return out;
}

}  // namespace kpn::source
