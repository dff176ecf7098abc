// Least connection's metrics (docs/operations.md#metrics): the choices committed and how long each
// took from the conntrack events that made it to the kernel; with --endpoint-connection-metrics,
// per endpoint of every least-connection service port, this node's active and inactive
// connections as the choices count them (one series per endpoint and state: behind a flag for
// the label cardinality).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "pkg/conntrack/lc_counts.h"

namespace kpn::metrics {

class LeastConnMetrics {
 public:
  LeastConnMetrics(prometheus::Registry& registry, bool endpointGauges);
  void landed(size_t choices, double seconds);
  // The counts now: series of endpoints that left are removed.
  void setEndpointConnections(const std::vector<conntrack::EndpointConnections>& rows);

 private:
  prometheus::Counter& choices_;
  prometheus::Histogram& latency_;
  prometheus::Family<prometheus::Gauge>* endpoints_ = nullptr;
  std::mutex mu_;
  std::vector<std::map<std::string, std::string>> shown_;  // label sets of the series shown
};

}  // namespace kpn::metrics
