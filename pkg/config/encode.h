// ProxyConfig -> KubeProxyConfiguration YAML (--write-config-to): every field, keys sorted as
// upstream's writer sorts them, strings quoted, durations in Go's syntax. decodeProxyConfig reads
// it back to the same ProxyConfig.
#pragma once

#include <string>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

std::string encodeProxyConfig(const ProxyConfig& c);

}  // namespace kpn::config
