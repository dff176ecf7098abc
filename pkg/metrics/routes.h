// What the metrics server (metricsBindAddress) answers: /metrics (text format), /proxyMode
// ("nftables"), and /healthz and /livez as upstream's metrics server answers its /healthz: a
// liveness ping, "ok". The healthz server's routes are pkg/health/healthz_server.h.
#pragma once

#include "pkg/http/server.h"
#include "pkg/metrics/proxy_metrics.h"

namespace kpn::metrics {

http::Handler metricsServerHandler(const ProxyMetrics& metrics);

}  // namespace kpn::metrics
