#include "pkg/config/proxy_config.h"

#include <tuple>

namespace kpn::config {

bool operator==(const VModule& a, const VModule& b) {
  return std::tie(a.filePattern, a.verbosity) == std::tie(b.filePattern, b.verbosity);
}

bool operator==(const KlogFlags& a, const KlogFlags& b) {
  return std::tie(a.logToStderr, a.alsoLogToStderr, a.stderrThreshold, a.logFile, a.logDir, a.logFileMaxSizeMB,
                  a.oneOutput, a.skipHeaders, a.skipLogHeaders, a.addDirHeader, a.logBacktraceAt) ==
         std::tie(b.logToStderr, b.alsoLogToStderr, b.stderrThreshold, b.logFile, b.logDir, b.logFileMaxSizeMB,
                  b.oneOutput, b.skipHeaders, b.skipLogHeaders, b.addDirHeader, b.logBacktraceAt);
}

}  // namespace kpn::config
