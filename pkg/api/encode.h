// The value types back to Kubernetes JSON, as the API server would print them: what decode.h reads
// (every field it reads, nothing else), so decoding the output gives the same value. The daemon
// hands `trace` the part of its state a trace needs this way (pkg/diag).
#pragma once

#include <string>

#include "pkg/api/types.h"

namespace kpn::api {

std::string encodeService(const Service& s);
std::string encodeEndpointSlice(const EndpointSlice& s);
std::string encodeNode(const Node& n);
std::string encodeServiceCIDR(const ServiceCIDR& c);

}  // namespace kpn::api
