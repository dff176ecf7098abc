#include "pkg/logging/klog_line.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cinttypes>
#include <cstdio>

namespace kpn::logging {

namespace {

std::string_view baseName(std::string_view file) {
  size_t slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

// zap's float64 encoding of epochMillis (strconv 'f', shortest): the microseconds as a fraction
// without trailing zeros.
std::string millisSinceEpoch(int64_t epochUsec) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, epochUsec / 1000, epochUsec % 1000);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::string_view shortFile(std::string_view file) {
  size_t slash = file.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return file;
  size_t dir = file.rfind('/', slash - 1);
  return dir == std::string_view::npos ? file : file.substr(dir + 1);
}

std::string klogHeader(char severity, const std::tm& local, int32_t usec, int64_t threadId, std::string_view file,
                       int line, bool addDirHeader) {
  std::string_view f = addDirHeader ? shortFile(file) : baseName(file);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%c%02d%02d %02d:%02d:%02d.%06d %7" PRId64 " ", severity, local.tm_mon + 1,
                        local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, static_cast<int>(usec), threadId);
  std::string h(buf, static_cast<size_t>(n));
  h.append(f);
  h += ':' + std::to_string(line) + ']';
  return h;
}

std::string textLine(const LogLine& l, const TextOptions& o) {
  std::string s;
  if (!o.skipHeaders) s = klogHeader(l.severity, l.local, l.usec, l.threadId, l.file, l.line, o.addDirHeader) + ' ';
  s.append(l.message);
  if (s.empty() || s.back() != '\n') s += '\n';
  return s;
}

std::string jsonLine(const LogLine& l) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("ts");
  std::string ts = millisSinceEpoch(l.epochUsec);
  w.RawValue(ts.data(), ts.size(), rapidjson::kNumberType);
  w.Key("caller");
  std::string caller = std::string(shortFile(l.file)) + ":" + std::to_string(l.line);
  w.String(caller.data(), static_cast<rapidjson::SizeType>(caller.size()));
  w.Key("msg");
  std::string_view msg = l.message;
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  w.String(msg.data(), static_cast<rapidjson::SizeType>(msg.size()));
  // klog hands warnings and fatal lines to the JSON logger as info at verbosity 0, errors as
  // errors, which carry no "v". glog does not tell a sink which VLOG level a line came from: every
  // info line says 0.
  if (l.severity != 'E') {
    w.Key("v");
    w.Int(0);
  }
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize()) + "\n";
}

}  // namespace kpn::logging
