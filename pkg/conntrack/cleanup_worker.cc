#include "pkg/conntrack/cleanup_worker.h"

#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "pkg/services/family.h"

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

void CleanupWorker::submitGapSweep(GapSnapshot sweep) {
  {
    std::lock_guard<std::mutex> g(mu_);
    pendingGap_ = std::move(sweep);
  }
  cv_.notify_all();
}

void CleanupWorker::waitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !pending_ && !pendingGap_ && !running_; });
}

size_t CleanupWorker::passes() const {
  std::lock_guard<std::mutex> g(mu_);
  return passes_;
}

void CleanupWorker::loop() {
  for (;;) {
    UdpSnapshot snap;
    GapSnapshot gap;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || pending_ || pendingGap_; });
      cv_.wait_until(lock, restUntil_, [this] { return stopping_; });
      if (stopping_) return;
      snap = std::move(pending_);
      pending_.reset();
      gap = std::move(pendingGap_);
      pendingGap_.reset();
      running_ = true;
    }
    auto start = std::chrono::steady_clock::now();
    if (gap) runGapSweep(*gap);
    if (snap && !cancel_) runPass(*snap);
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

bool CleanupWorker::ensureTable() {
  if (table_) return true;
  std::string err;
  table_ = open_(&err);
  if (!table_) {
    // Logged when it changes, not every sync; the next sync tries again.
    if (err != lastOpenError_) LOG(WARNING) << "conntrack cleanup unavailable: " << err;
    lastOpenError_ = err;
    return false;
  }
  lastOpenError_.clear();
  return true;
}

void CleanupWorker::runGapSweep(const GapSweep& sweep) {
  for (uint8_t family : {uint8_t(AF_INET), uint8_t(AF_INET6)}) {
    const char* name = services::familyWordOfAf(family);
    const GapFrontends& fe = family == AF_INET ? sweep.v4 : sweep.v6;
    for (uint8_t proto : {uint8_t(IPPROTO_TCP), uint8_t(IPPROTO_SCTP)}) {
      if (!fe.hasProto(proto)) continue;
      if (!ensureTable()) return;
      FamilyResult r = deleteFlows(*table_, family, proto, [&](const Flow& f) { return fe.isGapFlow(f); },
                                   kDeleteBatch, &cancel_);
      if (cancel_) {
        table_.reset();
        return;
      }
      const char* protoName = proto == IPPROTO_TCP ? "TCP" : "SCTP";
      if (!r.error.empty()) {
        LOG(WARNING) << "conntrack sweep after the rules rebuild (" << name << " " << protoName << "): " << r.error
                     << "; deleted " << r.deleted << " of " << r.stale << " entries without DNAT";
        table_.reset();
      }
      // Rare (a rebuild) and worth seeing: always logged.
      LOG(INFO) << "conntrack sweep after the rules rebuild family=" << name << " proto=" << protoName
                << ": deleted " << r.deleted << " of " << r.scanned << " entries (without DNAT, never answered, "
                << "to a service) ms=" << r.seconds * 1000;
      if (report_) report_(name, r);
    }
  }
}

void CleanupWorker::runPass(const UdpServices& services) {
  for (uint8_t family : {uint8_t(AF_INET), uint8_t(AF_INET6)}) {
    const char* name = services::familyWordOfAf(family);
    Frontends fe = Frontends::build(services, family);
    if (fe.empty()) continue;  // no UDP service with endpoints in this family: nothing can be stale
    if (!ensureTable()) return;
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
