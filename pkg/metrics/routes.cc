#include "pkg/metrics/routes.h"

#include "pkg/http/plain_text.h"

namespace kpn::metrics {

http::Handler metricsServerHandler(const ProxyMetrics& metrics) {
  return [&metrics](const http::Request& req) {
    std::string path = http::pathOf(req.target);
    if (path == "/metrics") return http::plainText(200, metrics.scrape(), "text/plain; version=0.0.4; charset=utf-8");
    if (path == "/proxyMode") return http::plainText(200, "nftables");
    if (path == "/healthz" || path == "/livez") return http::plainText(200, "ok");
    return http::notFound();
  };
}

}  // namespace kpn::metrics
