// --status-socket: where the daemon answers `status` and `trace` (pkg/diag/local_socket.h), and
// where those commands ask. Not upstream's: a flag of its own, beside the configuration.
#pragma once

#include <gflags/gflags.h>

DECLARE_string(status_socket);
