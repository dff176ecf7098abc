// One log line as klog writes it, for log pipelines that parse kube-proxy's output:
//   text: I1205 04:02:52.754104   13305 loop.cc:92] message
//         (severity letter, month and day without the year, local time to the microsecond, the
//         thread id right-aligned in 7 columns, file:line) - klog's header, not glog's;
//   json: {"ts":1733371372754.104,"caller":"sync/loop.cc:92","msg":"message","v":0}
//         (component-base's JSON logger: ts in milliseconds since the epoch, caller as zap's short
//         caller dir/file:line, "v" on every line but errors, as klog hands them to it).
// Pure functions: glog_setup.cc feeds them glog's lines.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace kpn::logging {

struct LogLine {
  char severity = 'I';    // I, W, E, F
  std::tm local{};        // the line's local time
  int32_t usec = 0;       // its microseconds
  int64_t epochUsec = 0;  // the same instant since the epoch (json's ts)
  int64_t threadId = 0;
  std::string_view file;  // as compiled: "pkg/sync/loop.cc"
  int line = 0;
  std::string_view message;
};

// "I1205 04:02:52.754104   13305 loop.cc:92]" (no trailing space). With addDirHeader the file
// keeps its directory: "sync/loop.cc:92".
std::string klogHeader(char severity, const std::tm& local, int32_t usec, int64_t threadId, std::string_view file,
                       int line, bool addDirHeader = false);

struct TextOptions {
  bool skipHeaders = false;   // klog's --skip-headers: the message alone
  bool addDirHeader = false;  // klog's --add-dir-header
};

// The whole line, newline-terminated.
std::string textLine(const LogLine& l, const TextOptions& o = {});
std::string jsonLine(const LogLine& l);

// "pkg/sync/loop.cc" -> "sync/loop.cc" (zap's ShortCallerEncoder: the last directory and the file).
std::string_view shortFile(std::string_view file);

}  // namespace kpn::logging
