// KubeProxyConfiguration text (YAML or JSON) -> ProxyConfig, strictly, as upstream's strict
// decoder: an unknown or duplicate field, a wrong type or a value that does not parse is an
// error naming the field's path (`conntrack.maxPerCore`, `ipvs.excludeCIDRs[1]`) and the value.
// Upstream's v1alpha1 defaults fill what the text leaves out (a zero sync period or
// configSyncPeriod counts as unset, as upstream). Semantic checks are in validate.h.
//
// The sync periods and the masquerade settings the daemon runs with are nftables.*: a field the
// nftables section does not set comes from the section upstream would have used for the mode
// given (ipvs.syncPeriod/minSyncPeriod for mode "ipvs", iptables.* otherwise; masqueradeAll and
// masqueradeBit from iptables.*), else from nftables mode's defaults (30s, 1s, false, 14).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

// Returns the error text (without the file name), or nullopt with `out` set.
std::optional<std::string> decodeProxyConfig(std::string_view text, ProxyConfig& out);

// upstream's AppendPortIfNeeded: "1.2.3.4" -> "1.2.3.4:port", "::1" -> "[::1]:port"; anything
// else (already host:port, or not an address at all: validation says so) unchanged.
std::string appendPortIfNeeded(const std::string& address, int port);

}  // namespace kpn::config
