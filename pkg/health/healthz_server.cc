#include "pkg/health/healthz_server.h"

#include "pkg/http/plain_text.h"

namespace kpn::health {

http::Handler healthzServerHandler(const ProxyHealth& health, const sync::Clock& clock, metrics::ProxyMetrics* metrics) {
  return [&health, &clock, metrics](const http::Request& req) {
    std::string path = http::pathOf(req.target);
    if (path == "/healthz") {
      http::Response r = healthzResponse(health, clock);
      if (metrics) metrics->countHealthz(r.status);
      return r;
    }
    if (path == "/livez") {
      http::Response r = livezResponse(health, clock);
      if (metrics) metrics->countLivez(r.status);
      return r;
    }
    return http::notFound();
  };
}

std::optional<std::string> HealthzServer::start(http::Loop& loop, const std::string& bindAddress,
                                                bool bindAddressHardFail, const ProxyHealth& health,
                                                const sync::Clock& clock, metrics::ProxyMetrics* metrics,
                                                http::BindFailureHook onBindFailure) {
  return http::startConfigured(loop, "healthz", "healthzBindAddress", bindAddress, false,
                               healthzServerHandler(health, clock, metrics), bindAddressHardFail, onBindFailure,
                               server_);
}

}  // namespace kpn::health
