#include "pkg/metrics/least_conn_metrics.h"

#include <algorithm>

namespace kpn::metrics {

namespace {

prometheus::Histogram::BucketBoundaries latencyBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double s = 0.0005; s < 10; s *= 2) b.push_back(s);  // 0.5 ms .. 8 s
  return b;
}

}  // namespace

LeastConnMetrics::LeastConnMetrics(prometheus::Registry& registry, bool endpointGauges)
    : choices_(prometheus::BuildCounter()
                   .Name("kubeproxy_nftables_least_connection_choices_total")
                   .Help("Endpoint choices of least-connection service ports committed to the kernel")
                   .Register(registry)
                   .Add({})),
      latency_(prometheus::BuildHistogram()
                   .Name("kubeproxy_nftables_least_connection_choice_latency_seconds")
                   .Help("From the conntrack events that made least-connection choices to their commit")
                   .Register(registry)
                   .Add({}, latencyBuckets())) {
  if (endpointGauges)
    endpoints_ = &prometheus::BuildGauge()
                      .Name("kubeproxy_nftables_endpoint_connections")
                      .Help("This node's connections to each endpoint of a least-connection service port, "
                            "active (TCP and SCTP established) or inactive (other states, UDP)")
                      .Register(registry);
}

void LeastConnMetrics::landed(size_t choices, double seconds) {
  choices_.Increment(static_cast<double>(choices));
  latency_.Observe(seconds);
}

void LeastConnMetrics::setEndpointConnections(const std::vector<conntrack::EndpointConnections>& rows) {
  if (!endpoints_) return;
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::map<std::string, std::string>> now;
  for (const auto& r : rows) {
    const size_t slash = r.serviceKey.find('/');
    std::map<std::string, std::string> labels = {{"namespace", r.serviceKey.substr(0, slash)},
                                                 {"service", r.serviceKey.substr(slash + 1)},
                                                 {"port", r.portName},
                                                 {"endpoint", r.endpoint}};
    for (const auto& [state, value] : {std::pair{"active", r.active}, std::pair{"inactive", r.inactive}}) {
      labels["state"] = state;
      endpoints_->Add(labels).Set(static_cast<double>(value));
      now.push_back(labels);
    }
  }
  std::sort(now.begin(), now.end());
  for (const auto& labels : shown_)
    if (!std::binary_search(now.begin(), now.end(), labels)) endpoints_->Remove(&endpoints_->Add(labels));
  shown_ = std::move(now);
}

}  // namespace kpn::metrics
