// Runs work on the sync loop's thread for another thread: the cluster state, the renderer and
// the syncer are single-threaded, so the diagnosis socket's thread hands its question over and
// waits for the answer. The loop polls fd() (runSyncLoop's wake fd) and every step of it runs the
// queued work (tick), so an answer takes at most one loop step, or the sync in progress.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pkg/source/unique_fd.h"
#include "pkg/sync/loop.h"

namespace kpn::diag {

class MainThreadCalls : public sync::SyncObserver {
 public:
  MainThreadCalls();
  // Readable when work is queued: poll it on the loop's thread.
  int fd() const { return wake_.get(); }
  // From any other thread: `work` runs on the loop's thread; its result, or nullopt when it did not
  // run within `limit` (a long sync) or the loop has stopped.
  std::optional<std::string> call(std::function<std::string()> work, std::chrono::milliseconds limit);
  // Fails every waiting and later call at once (the loop is done).
  void close();

  void tick(sync::SteadyTime) override { runQueued(); }
  void runQueued();

 private:
  struct Job {
    std::function<std::string()> work;
    std::optional<std::string> result;
    bool done = false;
  };
  source::UniqueFd wake_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool closed_ = false;
};

}  // namespace kpn::diag
