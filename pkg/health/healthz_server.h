// The healthz server: /healthz and /livez on healthzBindAddress, from the proxy's health, each
// reply counted in kubeproxy_proxy_{healthz,livez}_total (as upstream's healthz server counts
// them). An empty address disables it. A port in use: with bindAddressHardFail an error (the
// caller exits 1), without it one log line and a retry every 5 s, as upstream.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "pkg/health/proxy_health.h"
#include "pkg/http/retrying_server.h"
#include "pkg/http/server.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/sync/clock.h"

namespace kpn::health {

// The routes; `metrics` (null: none) counts the replies.
http::Handler healthzServerHandler(const ProxyHealth& health, const sync::Clock& clock, metrics::ProxyMetrics* metrics);

class HealthzServer {
 public:
  // nullopt when started (or retrying, or disabled); else the one line to exit with, naming the field.
  std::optional<std::string> start(http::Loop& loop, const std::string& bindAddress, bool bindAddressHardFail,
                                   const ProxyHealth& health, const sync::Clock& clock, metrics::ProxyMetrics* metrics,
                                   http::BindFailureHook onBindFailure = nullptr);

 private:
  std::unique_ptr<http::RetryingServer> server_;
};

}  // namespace kpn::health
