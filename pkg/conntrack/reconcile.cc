#include "pkg/conntrack/reconcile.h"

#include <netinet/in.h>

#include <chrono>

namespace kpn::conntrack {

FamilyResult deleteFlows(FlowTable& table, uint8_t family, uint8_t proto, const std::function<bool(const Flow&)>& stale,
                         size_t batch, const std::atomic<bool>* cancel) {
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
      family, proto,
      [&](const Flow& f) {
        if (cancel && cancel->load(std::memory_order_relaxed)) return false;
        ++res.scanned;
        if (f.family != family || f.proto != proto || !stale(f)) return true;
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

FamilyResult reconcileFamily(FlowTable& table, uint8_t family, const Frontends& frontends, size_t batch,
                             const std::atomic<bool>* cancel) {
  return deleteFlows(table, family, IPPROTO_UDP, [&](const Flow& f) { return frontends.isStale(f); }, batch, cancel);
}

}  // namespace kpn::conntrack
