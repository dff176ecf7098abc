// Upstream's validation (pkg/proxy/apis/config/validation) of a decoded or flag-built
// ProxyConfig, with the v1alpha1 field paths: each error names the field and the value.
#pragma once

#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

// Empty when the configuration can run.
std::vector<std::string> validate(const ProxyConfig& c);

// "127.0.0.1:10249", "[::]:10256": an IP literal and a port 0..65535 (0: the server is off).
bool validHostPort(const std::string& s);

}  // namespace kpn::config
