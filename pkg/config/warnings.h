// What of a configuration this daemon does not honour, one log line each, naming the field:
// logged once at start-up so that an operator who swapped the image sees what changed.
#pragma once

#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

struct StartupNotes {
  std::vector<std::string> warnings;  // a setting given that changes nothing here
  std::vector<std::string> info;      // accepted and applied differently, for the record
};

// fromConfigFile: c came from --config (an empty mode there is upstream's iptables mode, before 1.40).
StartupNotes startupNotes(const ProxyConfig& c, bool fromConfigFile = false);

// Upstream 1.37's gate of localhost NodePorts (alpha, off by default there). Here a loopback entry
// in nodePortAddresses alone turns them on; the gate set to false turns them off, as upstream.
inline const char* kLocalhostNodePortsGate = "KubeProxyNFTablesLocalhostNodePorts";

}  // namespace kpn::config
