#include "pkg/metrics/routes.h"

namespace kpn::metrics {

namespace {

std::string pathOf(const std::string& target) { return target.substr(0, target.find('?')); }

http::Response text(int status, std::string body, const char* type = "text/plain; charset=utf-8") {
  http::Response r;
  r.status = status;
  r.headers = {{"Content-Type", type}, {"X-Content-Type-Options", "nosniff"}};
  r.body = std::move(body);
  return r;
}

http::Response notFound() { return text(404, "404 page not found\n"); }

}  // namespace

http::Handler healthzServerHandler(const health::ProxyHealth& health, const sync::Clock& clock, ProxyMetrics* metrics) {
  return [&health, &clock, metrics](const http::Request& req) {
    std::string path = pathOf(req.target);
    if (path == "/healthz") {
      http::Response r = health::healthzResponse(health, clock);
      if (metrics) metrics->countHealthz(r.status);
      return r;
    }
    if (path == "/livez") {
      http::Response r = health::livezResponse(health, clock);
      if (metrics) metrics->countLivez(r.status);
      return r;
    }
    return notFound();
  };
}

http::Handler metricsServerHandler(const ProxyMetrics& metrics) {
  return [&metrics](const http::Request& req) {
    std::string path = pathOf(req.target);
    if (path == "/metrics") return text(200, metrics.scrape(), "text/plain; version=0.0.4; charset=utf-8");
    if (path == "/proxyMode") return text(200, "nftables");
    if (path == "/healthz" || path == "/livez") return text(200, "ok");
    return notFound();
  };
}

}  // namespace kpn::metrics
