#include "pkg/api/skip_report.h"

namespace kpn::api {

namespace {
SkipSink& sink() {
  static SkipSink s;
  return s;
}
bool startsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

void setSkipSink(SkipSink s) { sink() = std::move(s); }

void reportSkipped(const std::string& kind, const std::string& reason) {
  if (sink()) sink()(kind, reason);
}

void reportSkippedError(const std::string& error) {
  std::string kind = "unknown";
  for (const char* k : {"Service", "EndpointSlice", "Node", "ServiceCIDR"}) {
    std::string prefix = std::string(k) + " ";
    if (startsWith(error, prefix.c_str())) kind = k;
  }
  std::string reason = "invalid";
  if (startsWith(error, "unknown kind")) reason = "unknown_kind";
  else if (error.find(": apiVersion ") != std::string::npos) reason = "bad_api_version";
  else if (error.find("kubernetes.io/service-name") != std::string::npos) reason = "no_service_name";
  reportSkipped(kind, reason);
}

}  // namespace kpn::api
