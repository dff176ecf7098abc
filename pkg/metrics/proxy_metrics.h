// The daemon's Prometheus metrics, in a prometheus-cpp registry: upstream kube-proxy's (names,
// types, buckets and labels as upstream's nftables mode registers them, see
// ../shared/reference/upstream-nftables.md §3) and ours, named kubeproxy_nftables_*. Follows the
// sync loop as an observer; the HTTP side counts /healthz and /livez replies, the API client its
// requests. Every member is thread-safe (prometheus-cpp's metrics are), except that the sync
// loop's calls (queued, synced, setNoLocalEndpoints) come from its one thread.
//
// Series labelled ip_family exist for the families this node serves, and only those: upstream
// runs one proxier per family, so a dual-stack node counts each sync under both and a node
// whose kernel serves one family (no IPv6 nftables) counts it once. They are created, at zero,
// with the first sync, when the syncer has probed the kernel: a rate over them then sees the
// first observation too.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nft/expr.h"
#include "pkg/sync/loop.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
struct MetricFamily;
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

  // Where the served families come from, asked on the sync loop's thread after each sync
  // (sync::Syncer::families: known once its first sync has probed the kernel). Without it, both.
  using ServedFamilies = std::function<std::set<nft::Family>()>;
  void servedFamilies(ServedFamilies source) { servedSource_ = std::move(source); }

  void queued(sync::WallTime t) override;
  void synced(const sync::SyncReport& r) override;

  void countHealthz(int code);
  void countLivez(int code);
  void setChangeCounts(const ChangeCounts& c);
  void setNoLocalEndpoints(const NoLocalEndpoints& n);
  // An object a source dropped as invalid: kind "Service", "EndpointSlice", ...; reason a short
  // fixed word ("invalid", "unnamed", ...), never the object's own text (unbounded labels).
  void countSkipped(const std::string& kind, const std::string& reason);
  // A Kubernetes Event the recorder did not send (pkg/events/recorder.h's reasons). Any thread.
  void countEventDropped(const std::string& reason);
  // One request to the API server, as client-go's rest_client metrics count it.
  void observeRestRequest(const std::string& method, const std::string& host, int code, double seconds);

  // One family's UDP conntrack reconcile pass (pkg/conntrack): its duration and the flows it
  // deleted. Any thread; a family this node does not serve is not counted.
  void observeConntrackReconcile(const std::string& family, double seconds, size_t deleted);

  // Metrics read only when scraped (the nft counters of localhost_nodeports.h): `source` appends
  // its families; it runs on the scraping thread. Set before the servers start.
  using ScrapeSource = std::function<void(std::vector<prometheus::MetricFamily>&)>;
  void addScrapeSource(ScrapeSource source) { scrapeSources_.push_back(std::move(source)); }

  // The text exposition format of everything above plus the process_* metrics.
  std::string scrape() const;
  prometheus::Registry& registry() { return *registry_; }

 private:
  struct Families;
  void serve(const std::set<nft::Family>& families);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
  ServedFamilies servedSource_;
  std::vector<ScrapeSource> scrapeSources_;
};

}  // namespace kpn::metrics
