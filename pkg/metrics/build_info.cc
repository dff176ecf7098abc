#include "pkg/metrics/build_info.h"

#include "pkg/config/version.h"

namespace kpn::metrics {

BuildInfo buildInfo() { return {config::version(), config::gitCommit()}; }

}  // namespace kpn::metrics
