// Upstream 1.37's alpha metrics of NodePorts on loopback (KEP-6032), names and labels as its
// pkg/proxy/metrics: kubeproxy_nftables_localhost_nodeport_listeners{ip_family} (gauge),
// ..._listener_creation_failures_total{ip_family} and ..._rejected_packets_total{ip_family,protocol}
// (counters; the last one read from the table's named counters when scraped, as upstream's
// nft-counter collector does). Series exist for the families this node serves that have
// localhost NodePorts, and only those (the served-families rule of proxy_metrics.h).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "nft/expr.h"
#include "pkg/metrics/proxy_metrics.h"

namespace kpn::metrics {

class LocalhostNodePortMetrics {
 public:
  // `metrics`: the registry the families join, and the scrape hook the counters use. `table`:
  // our table name in each family.
  LocalhostNodePortMetrics(ProxyMetrics& metrics, std::string table);
  ~LocalhostNodePortMetrics();

  // Creates the series of family f (at zero) if not there yet; the sync loop's thread.
  void serve(nft::Family f);
  void setListeners(nft::Family f, size_t n);
  void countCreationFailures(nft::Family f, size_t n);

 private:
  struct Series;
  std::unique_ptr<Series> s_;
};

}  // namespace kpn::metrics
