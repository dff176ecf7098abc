#include "pkg/metrics/build_info.h"

#ifndef KPN_GIT_DESCRIBE
#define KPN_GIT_DESCRIBE "unknown"
#endif
#ifndef KPN_GIT_COMMIT
#define KPN_GIT_COMMIT "unknown"
#endif

namespace kpn::metrics {

BuildInfo buildInfo() { return {KPN_GIT_DESCRIBE, KPN_GIT_COMMIT}; }

}  // namespace kpn::metrics
