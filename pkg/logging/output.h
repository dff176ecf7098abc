// Where log lines go and how they look, decided once from the configuration's `logging:` and
// klog's flags, the way klog and component-base decide it:
//   - text (default) or json lines (klog_line.h);
//   - with --logtostderr (default true, klog's) every line to stderr; with split-stream, info and
//     warning lines to stdout and errors to stderr (upstream's logging.options.*.splitStream);
//   - with --logtostderr=false: to --log-file (appended, started over past its size limit), else
//     glog's per-severity files in --log-dir, plus stderr for lines at or above
//     --stderrthreshold (or all of them with --alsologtostderr).
// A value type with an encoding, so that the libnftables helper (the same binary, forked) writes
// its lines the way the daemon does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::logging {

enum class Format { Text, Json };

struct Output {
  Format format = Format::Text;
  bool toStderr = true;      // klog's --logtostderr
  bool splitStream = false;  // with toStderr: errors to stderr, the rest to stdout
  bool alsoToStderr = false;
  int stderrThreshold = 2;   // without toStderr: lines at or above this severity (0 info .. 3 fatal) to stderr too
  std::string file;          // without toStderr
  uint64_t fileMaxBytes = 1800ull << 20;  // 0: no limit
  std::string dir;           // without toStderr and file: glog's files there ("" the temporary directory)
  bool skipHeaders = false;
  bool addDirHeader = false;
  std::string backtraceAt;

  // glog writes the per-severity files itself; everything else goes through our sink.
  bool nativeFiles() const { return !toStderr && file.empty(); }
  bool operator==(const Output& o) const;
};

// The output the configuration asks for. `notes`: one line for each klog flag that has no effect
// as given (klog ignores them silently; we say so).
Output outputOf(const config::Logging& logging, const config::KlogFlags& klog, std::vector<std::string>* notes = nullptr);

// One line of text (for an environment variable), and back; nullopt for text that is not one.
std::string encodeOutput(const Output& o);
std::optional<Output> decodeOutput(const std::string& text);

}  // namespace kpn::logging
