// What the daemon's own HTTP servers answer. The healthz server (healthzBindAddress): /healthz
// and /livez from the proxy's health, each reply counted in kubeproxy_proxy_{healthz,livez}_total.
// The metrics server (metricsBindAddress): /metrics (text format), /proxyMode ("nftables"), and
// /healthz and /livez as upstream's metrics server answers its /healthz: a liveness ping, "ok".
#pragma once

#include "pkg/health/proxy_health.h"
#include "pkg/http/server.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/sync/clock.h"

namespace kpn::metrics {

http::Handler healthzServerHandler(const health::ProxyHealth& health, const sync::Clock& clock, ProxyMetrics* metrics);
http::Handler metricsServerHandler(const ProxyMetrics& metrics);

}  // namespace kpn::metrics
