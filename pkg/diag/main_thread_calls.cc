#include "pkg/diag/main_thread_calls.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace kpn::diag {

MainThreadCalls::MainThreadCalls() : wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_) throw std::system_error(errno, std::generic_category(), "eventfd");
}

std::optional<std::string> MainThreadCalls::call(std::function<std::string()> work, std::chrono::milliseconds limit) {
  auto job = std::make_shared<Job>();
  job->work = std::move(work);
  std::unique_lock<std::mutex> lk(mu_);
  if (closed_) return std::nullopt;
  queue_.push_back(job);
  uint64_t one = 1;
  ssize_t n = write(wake_.get(), &one, sizeof one);
  (void)n;  // EAGAIN: the counter is already set, the loop wakes anyway
  cv_.wait_for(lk, limit, [&] { return job->done || closed_; });
  if (!job->done) {
    // Not run in time: it must not run later against a caller that is gone.
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (*it == job) {
        queue_.erase(it);
        break;
      }
    return std::nullopt;
  }
  return job->result;
}

void MainThreadCalls::close() {
  std::lock_guard<std::mutex> lk(mu_);
  closed_ = true;
  queue_.clear();
  cv_.notify_all();
}

void MainThreadCalls::runQueued() {
  uint64_t count;
  while (read(wake_.get(), &count, sizeof count) > 0) {
  }
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    std::string result = job->work();  // without the lock: the work may take a while
    std::lock_guard<std::mutex> lk(mu_);
    job->result = std::move(result);
    job->done = true;
    cv_.notify_all();
  }
}

}  // namespace kpn::diag
