// Where the sources report an object they dropped as invalid, for the objects-skipped metric
// (kubeproxy_nftables_objects_skipped_total{kind,reason}). The decoders and sources log each skip
// themselves; this only counts. One process-wide sink, set once at start-up before any source
// runs; without one, reports go nowhere (tests, --dry-run).
#pragma once

#include <functional>
#include <string>

namespace kpn::api {

using SkipSink = std::function<void(const std::string& kind, const std::string& reason)>;

void setSkipSink(SkipSink sink);
// kind: "Service", "EndpointSlice", "Node", "ServiceCIDR", or "unknown"; reason: a fixed word
// ("invalid", "unnamed", "no_service_name", "unknown_kind", "bad_api_version").
void reportSkipped(const std::string& kind, const std::string& reason);
// The same for a decoder error text ("Service default/web: spec.ports[0]..."): kind and reason
// read from how the decoder words its errors.
void reportSkippedError(const std::string& error);

}  // namespace kpn::api
