#include "pkg/metrics/metrics_server.h"

#include "pkg/metrics/routes.h"

namespace kpn::metrics {

std::optional<std::string> MetricsServer::start(http::Loop& loop, const std::string& bindAddress,
                                                bool bindAddressHardFail, const ProxyMetrics& metrics,
                                                http::BindFailureHook onBindFailure) {
  // Upstream: port 0 disables the metrics server.
  return http::startConfigured(loop, "metrics", "metricsBindAddress", bindAddress, true, metricsServerHandler(metrics),
                               bindAddressHardFail, onBindFailure, server_);
}

}  // namespace kpn::metrics
