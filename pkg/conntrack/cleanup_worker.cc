#include "pkg/conntrack/cleanup_worker.h"

#include <glog/logging.h>
#include <sys/socket.h>

namespace kpn::conntrack {

CleanupWorker::CleanupWorker(TableFactory open, Reporter report)
    : open_(std::move(open)), report_(std::move(report)), thread_([this] { loop(); }) {}

CleanupWorker::~CleanupWorker() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cancel_ = true;
  cv_.notify_all();
  thread_.join();
}

void CleanupWorker::submit(UdpSnapshot snapshot) {
  {
    std::lock_guard<std::mutex> g(mu_);
    pending_ = std::move(snapshot);
  }
  cv_.notify_all();
}

void CleanupWorker::waitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !pending_ && !running_; });
}

size_t CleanupWorker::passes() const {
  std::lock_guard<std::mutex> g(mu_);
  return passes_;
}

void CleanupWorker::loop() {
  for (;;) {
    UdpSnapshot snap;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || pending_; });
      cv_.wait_until(lock, restUntil_, [this] { return stopping_; });
      if (stopping_) return;
      snap = std::move(pending_);
      pending_.reset();
      running_ = true;
    }
    auto start = std::chrono::steady_clock::now();
    runPass(*snap);
    {
      std::lock_guard<std::mutex> g(mu_);
      running_ = false;
      ++passes_;
      auto end = std::chrono::steady_clock::now();
      restUntil_ = end + (end - start);
    }
    cv_.notify_all();
  }
}

void CleanupWorker::runPass(const UdpServices& services) {
  for (uint8_t family : {uint8_t(AF_INET), uint8_t(AF_INET6)}) {
    const char* name = family == AF_INET ? "IPv4" : "IPv6";
    Frontends fe = Frontends::build(services, family);
    if (fe.empty()) continue;  // no UDP service with endpoints in this family: nothing can be stale
    if (!table_) {
      std::string err;
      table_ = open_(&err);
      if (!table_) {
        // Logged when it changes, not every sync; the next sync tries again.
        if (err != lastOpenError_) LOG(WARNING) << "UDP conntrack cleanup unavailable: " << err;
        lastOpenError_ = err;
        return;
      }
      lastOpenError_.clear();
    }
    FamilyResult r = reconcileFamily(*table_, family, fe, kDeleteBatch, &cancel_);
    if (cancel_) {
      table_.reset();  // the dump's rest is still in the socket
      return;
    }
    if (!r.error.empty()) {
      LOG(WARNING) << "UDP conntrack cleanup (" << name << "): " << r.error << "; deleted " << r.deleted
                   << " of " << r.stale << " stale flows, the next sync retries";
      table_.reset();
    }
    if (r.deleted > 0)
      LOG(INFO) << "conntrack reconcile family=" << name << " flows=" << r.scanned << " stale=" << r.stale
                << " deleted=" << r.deleted << " ms=" << r.seconds * 1000;
    else
      VLOG(2) << "conntrack reconcile family=" << name << " flows=" << r.scanned << " stale=" << r.stale
              << " deleted=0 ms=" << r.seconds * 1000;
    if (report_) report_(name, r);
  }
}

}  // namespace kpn::conntrack
