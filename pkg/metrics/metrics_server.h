// The metrics server: /metrics (and /proxyMode, /healthz, /livez: routes.h) on
// metricsBindAddress. An empty address disables it, and so does port 0. A port in use: with
// bindAddressHardFail an error (the caller exits 1), without it one log line and a retry every
// 5 s, as upstream. The healthz server is pkg/health/healthz_server.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "pkg/http/retrying_server.h"
#include "pkg/metrics/proxy_metrics.h"

namespace kpn::metrics {

class MetricsServer {
 public:
  // nullopt when started (or retrying, or disabled); else the one line to exit with, naming the field.
  std::optional<std::string> start(http::Loop& loop, const std::string& bindAddress, bool bindAddressHardFail,
                                   const ProxyMetrics& metrics, http::BindFailureHook onBindFailure = nullptr);

 private:
  std::unique_ptr<http::RetryingServer> server_;
};

}  // namespace kpn::metrics
