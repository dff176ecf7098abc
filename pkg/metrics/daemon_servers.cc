#include "pkg/metrics/daemon_servers.h"

#include <glog/logging.h>

#include "pkg/http/bind_address.h"
#include "pkg/metrics/routes.h"

namespace kpn::metrics {

std::optional<std::string> DaemonServers::start(http::Loop& loop, const ServerOptions& opts,
                                                const health::ProxyHealth& health, const sync::Clock& clock,
                                                ProxyMetrics& metrics, BindFailureHook onBindFailure) {
  std::string err;
  auto failed = [&](const char* what) {
    if (onBindFailure && !err.empty()) onBindFailure(what, err);
  };
  if (!opts.healthzBindAddress.empty()) {
    auto a = http::parseBindAddress(opts.healthzBindAddress, &err);
    if (!a) return "healthzBindAddress " + err;
    healthz_ = http::RetryingServer::start(loop, "healthz", a->host, a->port,
                                           healthzServerHandler(health, clock, &metrics), opts.bindAddressHardFail, &err);
    if (!healthz_ || !healthz_->listening()) failed("healthz");
    if (!healthz_) return err;
    if (healthz_->listening()) LOG(INFO) << "healthz server listening on " << opts.healthzBindAddress;
    err.clear();
  }
  if (!opts.metricsBindAddress.empty()) {
    auto a = http::parseBindAddress(opts.metricsBindAddress, &err);
    if (!a) return "metricsBindAddress " + err;
    if (a->port == 0) return std::nullopt;  // upstream: port 0 disables the metrics server
    metrics_ = http::RetryingServer::start(loop, "metrics", a->host, a->port, metricsServerHandler(metrics),
                                           opts.bindAddressHardFail, &err);
    if (!metrics_ || !metrics_->listening()) failed("metrics");
    if (!metrics_) return err;
    if (metrics_->listening()) LOG(INFO) << "metrics server listening on " << opts.metricsBindAddress;
  }
  return std::nullopt;
}

}  // namespace kpn::metrics
