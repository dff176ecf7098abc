// The command line: the flags (pkg/config/flag_table.h) and the ProxyConfig they yield.
#pragma once

#include <string>
#include <vector>

#include "pkg/config/command_line.h"

namespace kpn::cmd {

// Parses `args` (argv after the program name, or after a subcommand's own flags), answers --help
// and --version (exit 0), loads --config by upstream's precedence and validates. A bad flag or
// configuration: one line on stderr, exit 2. Sets up logging (format, destination, --v,
// --vmodule). --write-config-to: writes the effective configuration and exits 0. Logs what is ignored or not honoured.
config::Loaded loadConfigOrExit(const std::vector<std::string>& args);

}  // namespace kpn::cmd
