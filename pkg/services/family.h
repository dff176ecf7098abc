// Upstream's word for an IP family: "IPv4" or "IPv6", as an EndpointSlice's addressType and the
// metrics' ip_family label spell it. The one place that spells it.
#pragma once

#include <sys/socket.h>

#include "nft/expr.h"
#include "pkg/net/ip.h"

namespace kpn::services {

inline const char* familyWord(net::Family f) { return f == net::Family::V6 ? "IPv6" : "IPv4"; }
inline const char* familyWord(nft::Family f) { return familyWord(f == nft::Family::IPv6 ? net::Family::V6 : net::Family::V4); }
// AF_INET or AF_INET6 (conntrack's families).
inline const char* familyWordOfAf(int af) { return familyWord(af == AF_INET ? net::Family::V4 : net::Family::V6); }

}  // namespace kpn::services
