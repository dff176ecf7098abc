// The version and commit this binary was built from, as --version prints them
// (pkg/config/version), for kubeproxy_nftables_build_info.
#pragma once

#include "pkg/metrics/proxy_metrics.h"

namespace kpn::metrics {

BuildInfo buildInfo();

}  // namespace kpn::metrics
