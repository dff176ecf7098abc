// The daemon's Prometheus metrics, in a prometheus-cpp registry: upstream kube-proxy's (names,
// types, buckets and labels as upstream's nftables mode registers them, see
// ../shared/reference/upstream-nftables.md §3) and ours, named kubeproxy_nftables_*. Follows the
// sync loop as an observer; the HTTP side counts /healthz and /livez replies, the API client its
// requests. Every member is thread-safe (prometheus-cpp's metrics are).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "pkg/sync/loop.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace kpn::metrics {

struct BuildInfo {
  std::string version;
  std::string commit;
};

// Counts of changes the sources applied, as upstream's change trackers report them.
struct ChangeCounts {
  size_t endpointPending = 0, servicePending = 0;
  uint64_t endpointTotal = 0, serviceTotal = 0;
};

// Services with a Local traffic policy whose endpoints are all on other nodes, per family.
struct NoLocalEndpoints {
  size_t internalV4 = 0, internalV6 = 0, externalV4 = 0, externalV6 = 0;
};

class ProxyMetrics : public sync::SyncObserver {
 public:
  explicit ProxyMetrics(const BuildInfo& build);
  ~ProxyMetrics() override;

  void queued(sync::WallTime t) override;
  void synced(const sync::SyncReport& r) override;

  void countHealthz(int code);
  void countLivez(int code);
  void setChangeCounts(const ChangeCounts& c);
  void setNoLocalEndpoints(const NoLocalEndpoints& n);
  // An object a source dropped as invalid: kind "Service", "EndpointSlice", ...; reason a short
  // fixed word ("invalid", "unnamed", ...), never the object's own text (unbounded labels).
  void countSkipped(const std::string& kind, const std::string& reason);
  // One request to the API server, as client-go's rest_client metrics count it.
  void observeRestRequest(const std::string& method, const std::string& host, int code, double seconds);

  // One family's UDP conntrack reconcile pass (pkg/conntrack): its duration and the flows it deleted.
  void observeConntrackReconcile(const std::string& family, double seconds, size_t deleted);

  // The text exposition format of everything above plus the process_* metrics.
  std::string scrape() const;
  prometheus::Registry& registry() { return *registry_; }

 private:
  struct Families;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
};

}  // namespace kpn::metrics
