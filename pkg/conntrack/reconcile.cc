#include "pkg/conntrack/reconcile.h"

#include <chrono>

namespace kpn::conntrack {

FamilyResult reconcileFamily(FlowTable& table, uint8_t family, const Frontends& frontends, size_t batch,
                             const std::atomic<bool>* cancel) {
  auto start = std::chrono::steady_clock::now();
  FamilyResult res;
  std::vector<Flow> pending;
  pending.reserve(batch);
  auto flush = [&] {
    std::string err;
    res.deleted += table.destroy(pending, &err);
    if (!err.empty() && res.error.empty()) res.error = err;
    pending.clear();
  };
  std::string dumpError;
  bool ok = table.dump(
      family,
      [&](const Flow& f) {
        if (cancel && cancel->load(std::memory_order_relaxed)) return false;
        ++res.scanned;
        if (f.family != family || !frontends.isStale(f)) return true;
        ++res.stale;
        pending.push_back(f);
        if (pending.size() >= batch) flush();
        return true;
      },
      &dumpError);
  if (!pending.empty()) flush();
  if (!ok) res.error = dumpError;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

}  // namespace kpn::conntrack
