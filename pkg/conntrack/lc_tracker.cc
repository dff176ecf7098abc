#include "pkg/conntrack/lc_tracker.h"

#include <glog/logging.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <set>
#include <tuple>

#include "pkg/conntrack/lc_events.h"
#include "pkg/conntrack/netlink_table.h"

namespace kpn::conntrack {

namespace {

constexpr size_t kMaxPrefixesV4 = 127, kMaxPrefixesV6 = 20;  // nfct_filter's room (lc_events.h)
constexpr auto kCountsEvery = std::chrono::milliseconds(500);  // per-endpoint counts refresh
constexpr auto kRetryOpen = std::chrono::seconds(5);

void signal(int fd) {
  uint64_t one = 1;
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;
}

void clear(int fd) {
  uint64_t v;
  ssize_t n = read(fd, &v, sizeof v);
  (void)n;
}

using PortId = std::tuple<std::string, std::string, nft::Family, api::Protocol, std::vector<std::string>,
                          std::optional<int32_t>>;

// What makes a dump necessary when it changes: a port (or a frontend of one) this side has not
// counted yet. Endpoints that come and go need none: their entries come with them.
std::set<PortId> countedPorts(const std::map<std::string, std::vector<services::LeastConnPort>>& ports) {
  std::set<PortId> out;
  for (const auto& [key, list] : ports)
    for (const auto& p : list) out.emplace(p.serviceKey, p.portName, p.family, p.protocol, p.frontendIps, p.nodePort);
  return out;
}

EventFilter filterFor(const LeastConnCounter& counter) {
  EventFilter f;
  std::set<uint8_t> protocols;
  for (uint8_t family : {uint8_t(AF_INET), uint8_t(AF_INET6)})
    for (uint8_t p : counter.protocols(family)) protocols.insert(p);
  f.protocols.assign(protocols.begin(), protocols.end());
  f.v4 = !counter.protocols(AF_INET).empty();
  f.v6 = !counter.protocols(AF_INET6).empty();
  f.allV4 = counter.anyNodePort(AF_INET);
  f.allV6 = counter.anyNodePort(AF_INET6);
  std::vector<Ip> v4, v6;
  for (const auto& a : counter.frontendAddresses()) (a.family == AF_INET ? v4 : v6).push_back(a.ip);
  f.prefixesV4 = coverPrefixes(v4, AF_INET, kMaxPrefixesV4);
  f.prefixesV6 = coverPrefixes(v6, AF_INET6, kMaxPrefixesV6);
  return f;
}

}  // namespace

LeastConnTracker::LeastConnTracker(Options options)
    : options_(options),
      readyFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      wakeFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { loop(); }) {}

LeastConnTracker::~LeastConnTracker() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  signal(wakeFd_);
  cv_.notify_all();
  thread_.join();
  close(readyFd_);
  close(wakeFd_);
}

void LeastConnTracker::setPorts(std::map<std::string, std::vector<services::LeastConnPort>> ports) {
  {
    std::lock_guard<std::mutex> g(mu_);
    ports_ = std::move(ports);
    portsPending_ = true;
  }
  signal(wakeFd_);
  cv_.notify_all();
}

LeastConnTracker::Choices LeastConnTracker::takeChoices() {
  clear(readyFd_);
  Choices out;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [set, values] : pending_) out.choices.push_back({set.first, set.second, std::move(values)});
  out.since = pendingSince_;
  pending_.clear();
  return out;
}

std::vector<EndpointConnections> LeastConnTracker::endpointConnections() const {
  std::lock_guard<std::mutex> g(mu_);
  return counts_;
}

LeastConnTracker::Stats LeastConnTracker::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

bool LeastConnTracker::waitResynced(uint64_t atLeast, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return stats_.resyncs >= atLeast; });
}

void LeastConnTracker::publish(std::vector<LeastConnChoice> choices) {
  if (choices.empty()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (pending_.empty()) pendingSince_ = std::chrono::steady_clock::now();
    for (LeastConnChoice& c : choices) pending_[{c.serviceKey, c.owner}] = std::move(c.values);
  }
  signal(readyFd_);
}

void LeastConnTracker::loop() {
  LeastConnCounter counter;
  std::unique_ptr<ConntrackEvents> events;
  std::unique_ptr<NetlinkFlowTable> table;
  std::mt19937 rng(std::random_device{}());
  std::optional<EventFilter> filter;
  std::set<PortId> counted;
  std::string lastError;
  bool needResync = false;
  auto nextResync = std::chrono::steady_clock::now();
  auto countsAt = std::chrono::steady_clock::time_point{};
  bool countsStale = false;  // counted since the per-endpoint counts were last published
  auto failed = [&](const std::string& error) {
    if (error != lastError)
      LOG(WARNING) << "least connection: " << error << "; the slots keep their last choice until it works";
    lastError = error;
  };
  auto apply = [&](ConntrackEvents::Kind kind, const Flow& f) {
    if (kind == ConntrackEvents::Kind::Destroy) {
      if (f.id) counter.destroy(*f.id);
    } else {
      counter.update(f, std::chrono::steady_clock::now());
    }
  };
  // Reads the queued events; a loss makes the next step a dump.
  auto drain = [&] {
    std::string error;
    const uint64_t before = events->received();
    if (!events->drain(apply, &error)) {
      needResync = true;
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.lostEvents;
    }
    if (!error.empty()) failed(error);
    std::lock_guard<std::mutex> g(mu_);
    stats_.events += events->received() - before;
  };
  auto resync = [&] {
    std::string error;
    if (!table) table = NetlinkFlowTable::open(&error);
    if (!table) return failed(error);
    auto start = std::chrono::steady_clock::now();
    counter.beginResync();
    for (uint8_t family : {uint8_t(AF_INET), uint8_t(AF_INET6)})
      for (uint8_t proto : counter.protocols(family))
        if (!table->dump(family, proto, [&](const Flow& f) { return counter.resyncEntry(f), true; }, &error)) {
          table.reset();
          return failed(error);
        }
    counter.endResync();
    VLOG(2) << "least connection: counted " << counter.entries() << " conntrack entries of " << counter.ports()
            << " service ports in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
            << " ms";
    {
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.resyncs;
    }
    cv_.notify_all();
  };
  auto publishCounts = [&](bool now) {
    auto t = std::chrono::steady_clock::now();
    countsStale = true;
    if (!options_.endpointCounts || (!now && t - countsAt < kCountsEvery)) return;
    countsAt = t;
    countsStale = false;
    std::vector<EndpointConnections> counts = counter.endpointConnections();
    std::lock_guard<std::mutex> g(mu_);
    counts_ = std::move(counts);
    stats_.entries = counter.entries();
  };

  for (;;) {
    std::map<std::string, std::vector<services::LeastConnPort>> ports;
    bool newPorts = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!events) {
        // Idle without ports; after a failed open, retry now and then.
        if (counter.ports() == 0) cv_.wait(lock, [&] { return stopping_ || portsPending_; });
        else cv_.wait_for(lock, kRetryOpen, [&] { return stopping_ || portsPending_; });
      }
      if (stopping_) return;
      if (portsPending_) {
        ports = std::move(ports_);
        portsPending_ = false;
        newPorts = true;
      }
      stats_.entries = counter.entries();
    }
    if (newPorts) {
      std::set<PortId> now = countedPorts(ports);
      for (const PortId& p : now) needResync = needResync || !counted.count(p);
      counted = std::move(now);
      counter.setPorts(ports);
      if (counter.ports() == 0) {
        events.reset(), table.reset(), filter.reset();
        publishCounts(true);
        continue;
      }
    }
    if (!events) {
      std::string error;
      events = ConntrackEvents::open(&error);
      if (!events) {
        failed(error);
        continue;
      }
      filter.reset();
      needResync = true;
    }
    // Only when the ports change: covering a thousand frontends is not for every wake-up.
    if (EventFilter want = (newPorts || !filter) ? filterFor(counter) : *filter; !filter || !(*filter == want)) {
      std::string error;
      if (!events->setFilter(want, &error)) failed(error);
      filter = want;
    }
    if (needResync || std::chrono::steady_clock::now() >= nextResync) {
      drain();  // older than the dump: applied first
      resync();
      needResync = false;
      nextResync = std::chrono::steady_clock::now() + options_.resyncEvery;
      publishCounts(true);
    }
    publish(counter.takeChoices(rng, std::chrono::steady_clock::now()));

    auto until = std::min(nextResync, counter.nextExpiry());  // a burst's arrivals age out: choose again
    if (countsStale && options_.endpointCounts) until = std::min(until, countsAt + kCountsEvery);
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd fds[2] = {{events->fd(), POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::max<int64_t>(0, wait.count()) + 1));
    if (n > 0 && (fds[1].revents & POLLIN)) clear(wakeFd_);
    if (n > 0 && (fds[0].revents & POLLIN)) drain();
    publish(counter.takeChoices(rng, std::chrono::steady_clock::now()));
    publishCounts(false);
  }
}

}  // namespace kpn::conntrack
