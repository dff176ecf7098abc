// The version and commit this binary was built from (the Makefile passes `git describe` and the
// commit hash to build_info.cc only, so a new commit recompiles one file).
#pragma once

#include "pkg/metrics/proxy_metrics.h"

namespace kpn::metrics {

BuildInfo buildInfo();

}  // namespace kpn::metrics
