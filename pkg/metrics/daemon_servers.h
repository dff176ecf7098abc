// The daemon's own servers: /healthz and /livez on healthzBindAddress, /metrics (and /proxyMode,
// /healthz, /livez) on metricsBindAddress. An empty address disables a server, and so does port 0
// for metrics. A port in use: with bindAddressHardFail an error (the caller exits 1), without it
// one log line and a retry every 5 s, as upstream.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "pkg/health/proxy_health.h"
#include "pkg/http/retrying_server.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/sync/clock.h"

namespace kpn::metrics {

struct ServerOptions {
  std::string healthzBindAddress = "0.0.0.0:10256";
  std::string metricsBindAddress = "127.0.0.1:10249";
  bool bindAddressHardFail = false;
};

class DaemonServers {
 public:
  // Told which server ("healthz", "metrics") could not bind, and why: with bindAddressHardFail
  // before start returns the error, else while it retries.
  using BindFailureHook = std::function<void(const std::string& what, const std::string& error)>;
  // nullopt when started (or retrying); else the one line to exit with, naming the field.
  std::optional<std::string> start(http::Loop& loop, const ServerOptions& opts, const health::ProxyHealth& health,
                                   const sync::Clock& clock, ProxyMetrics& metrics,
                                   BindFailureHook onBindFailure = nullptr);
  int healthzPort() const { return healthz_ ? healthz_->port() : 0; }
  int metricsPort() const { return metrics_ ? metrics_->port() : 0; }

 private:
  std::unique_ptr<http::RetryingServer> healthz_, metrics_;
};

}  // namespace kpn::metrics
