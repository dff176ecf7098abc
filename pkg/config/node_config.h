// What the renderer takes from the configuration.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"
#include "pkg/services/node_config.h"

namespace kpn::config {

// hostnameOverride trimmed, else the hostname; lowercased (upstream's GetHostname).
std::string nodeName(const ProxyConfig& c, const std::string& hostname);

// Fills cluster CIDRs, masquerade (all, mark = 1 << nftables.masqueradeBit), NodePort addresses
// and local-traffic detection of `out`. Returns an error for a configuration that did not pass
// validate(); `warnings` gets what is applied with a caveat.
std::optional<std::string> toNodeConfig(const ProxyConfig& c, services::NodeConfig& out, std::vector<std::string>* warnings);

}  // namespace kpn::config
