#include "pkg/config/version.h"

#ifndef KPN_VERSION
#define KPN_VERSION "unknown"
#endif
#ifndef KPN_GIT_COMMIT
#define KPN_GIT_COMMIT "unknown"
#endif

namespace kpn::config {

std::string version() { return KPN_VERSION; }
std::string gitCommit() { return KPN_GIT_COMMIT; }
std::string versionLine() { return version() + " (commit " + gitCommit() + ")"; }

}  // namespace kpn::config
