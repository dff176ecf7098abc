// The command line: flag definitions (upstream's names) and the ProxyConfig they yield.
#pragma once

#include "pkg/config/command_line.h"

namespace kpn::cmd {

// Reads the flags given (gflags has parsed argv), loads --config by upstream's precedence and
// validates. A bad flag or configuration: one line on stderr, exit 2. --write-config-to: writes
// the effective configuration and exits 0. Applies the logging settings (--v / logging.verbosity,
// vmodule) and logs what is ignored or not honoured.
config::Loaded loadConfigOrExit();

}  // namespace kpn::cmd
