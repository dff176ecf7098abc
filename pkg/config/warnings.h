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

StartupNotes startupNotes(const ProxyConfig& c);

}  // namespace kpn::config
