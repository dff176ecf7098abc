// glog, set up to write klog's lines (klog_line.h) where the configuration says (output.h):
// glog's custom prefix callback gives the lines glog writes itself (before the configuration is
// read, and --log-dir files) klog's header; one glog LogSink writes every other line, in either
// format, to stderr, stdout or --log-file. The rest is glog's: LOG/VLOG, --v, --vmodule.
#pragma once

#include <vector>

#include "pkg/config/proxy_config.h"
#include "pkg/logging/output.h"

namespace kpn::logging {

// Call first in main(), before anything logs: text lines with klog's header on stderr, or, in a
// process the daemon started (the libnftables helper), the daemon's output (from the environment).
void startLogging(const char* argv0);

// The configured output, verbosity and vmodule; exported to the environment for the processes
// the daemon starts. Call before any thread logs.
void applyLogging(const Output& output, const config::Logging& logging);

}  // namespace kpn::logging
