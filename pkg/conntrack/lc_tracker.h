// Least connection's thread: keeps the counts (lc_counts.h) from the kernel's conntrack events
// (lc_events.h) and from a filtered dump at the start, after a lost event, when a port comes, and
// every `resyncEvery` (the dump corrects what events missed); hands new choices to the sync
// thread, which reads them when fd() is readable. Without a least-connection port it holds no
// socket and costs nothing. A kernel it cannot open (no CAP_NET_ADMIN) is logged once per distinct
// error and retried with the next ports; the slots keep their last choice meanwhile.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pkg/conntrack/lc_counts.h"

namespace kpn::conntrack {

class LeastConnTracker {
 public:
  struct Options {
    std::chrono::milliseconds resyncEvery{30000};
    bool endpointCounts = false;  // keep per-endpoint counts for endpointConnections()
  };
  explicit LeastConnTracker(Options options);
  ~LeastConnTracker();
  LeastConnTracker(const LeastConnTracker&) = delete;
  LeastConnTracker& operator=(const LeastConnTracker&) = delete;

  // The ports to count (the renderer's least-connection ports). Any thread.
  void setPorts(std::map<std::string, std::vector<services::LeastConnPort>> ports);

  // Readable (an eventfd) while choices wait.
  int fd() const { return readyFd_; }
  struct Choices {
    std::vector<LeastConnChoice> choices;  // the latest of each set since the last take
    std::chrono::steady_clock::time_point since;  // when the oldest of them was made
  };
  Choices takeChoices();

  // Every endpoint's counts as of the last batch of events (Options::endpointCounts).
  std::vector<EndpointConnections> endpointConnections() const;

  struct Stats {
    uint64_t events = 0;       // events read (after the kernel's filter)
    uint64_t resyncs = 0;      // dumps taken
    uint64_t lostEvents = 0;   // times the kernel dropped events (ENOBUFS)
    size_t entries = 0;        // conntrack entries counted now
  };
  Stats stats() const;
  // Tests: blocks until the thread has counted the given ports' entries once (a dump done).
  bool waitResynced(uint64_t atLeast, std::chrono::milliseconds timeout) const;

 private:
  void loop();
  void publish(std::vector<LeastConnChoice> choices);

  Options options_;
  int readyFd_ = -1, wakeFd_ = -1;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stopping_ = false;
  bool portsPending_ = false;
  std::map<std::string, std::vector<services::LeastConnPort>> ports_;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> pending_;  // (service, owner) -> values
  std::chrono::steady_clock::time_point pendingSince_{};
  std::vector<EndpointConnections> counts_;
  Stats stats_;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace kpn::conntrack
