#include "pkg/logging/output.h"

#include <cstdlib>
#include <map>
#include <sstream>

namespace kpn::logging {

bool Output::operator==(const Output& o) const {
  return format == o.format && toStderr == o.toStderr && splitStream == o.splitStream &&
         alsoToStderr == o.alsoToStderr && stderrThreshold == o.stderrThreshold && file == o.file &&
         fileMaxBytes == o.fileMaxBytes && dir == o.dir && skipHeaders == o.skipHeaders &&
         addDirHeader == o.addDirHeader && backtraceAt == o.backtraceAt;
}

Output outputOf(const config::Logging& logging, const config::KlogFlags& klog, std::vector<std::string>* notes) {
  Output o;
  o.format = logging.format == "json" ? Format::Json : Format::Text;
  o.toStderr = klog.logToStderr;
  o.splitStream = o.format == Format::Json ? logging.options.json.splitStream : logging.options.text.splitStream;
  o.alsoToStderr = klog.alsoLogToStderr;
  o.stderrThreshold = klog.stderrThreshold;
  o.file = klog.logFile;
  o.fileMaxBytes = uint64_t(klog.logFileMaxSizeMB) << 20;
  o.dir = klog.logDir;
  o.skipHeaders = klog.skipHeaders;
  o.addDirHeader = klog.addDirHeader;
  o.backtraceAt = klog.logBacktraceAt;
  if (!notes) return o;
  if (o.toStderr) {
    if (!o.file.empty()) notes->push_back("--log-file=" + o.file + " has no effect while --logtostderr is true (klog's rule); add --logtostderr=false");
    if (!o.dir.empty()) notes->push_back("--log-dir=" + o.dir + " has no effect while --logtostderr is true (klog's rule); add --logtostderr=false");
  } else {
    if (o.splitStream) notes->push_back("split-stream has no effect with --logtostderr=false (klog's files take the lines)");
    if (!o.file.empty() && !o.dir.empty()) notes->push_back("--log-dir=" + o.dir + " has no effect beside --log-file (klog's rule)");
  }
  if (klog.oneOutput) notes->push_back("--one-output is not honoured: a --log-dir file holds its severity and the ones above");
  if (klog.skipLogHeaders) notes->push_back("--skip-log-headers is not honoured: --log-dir files start with glog's header");
  if (o.addDirHeader && o.nativeFiles()) notes->push_back("--add-dir-header does not reach --log-dir files (glog names the file only)");
  return o;
}

std::string encodeOutput(const Output& o) {
  std::ostringstream s;
  s << "format=" << (o.format == Format::Json ? "json" : "text") << "\x1f"
    << "stderr=" << o.toStderr << "\x1f"
    << "split=" << o.splitStream << "\x1f"
    << "also=" << o.alsoToStderr << "\x1f"
    << "threshold=" << o.stderrThreshold << "\x1f"
    << "max=" << o.fileMaxBytes << "\x1f"
    << "skip=" << o.skipHeaders << "\x1f"
    << "dirheader=" << o.addDirHeader << "\x1f"
    << "backtrace=" << o.backtraceAt << "\x1f"
    << "dir=" << o.dir << "\x1f"
    << "file=" << o.file;
  return s.str();
}

std::optional<Output> decodeOutput(const std::string& text) {
  // Fields separated by the ASCII unit separator, which no path or pattern here contains.
  std::map<std::string, std::string> fields;
  std::istringstream s(text);
  std::string item;
  while (std::getline(s, item, '\x1f')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) return std::nullopt;
    fields[item.substr(0, eq)] = item.substr(eq + 1);
  }
  for (const char* k : {"format", "stderr", "split", "also", "threshold", "max", "skip", "dirheader", "backtrace", "dir", "file"})
    if (!fields.count(k)) return std::nullopt;
  auto flag = [&](const char* k) { return fields[k] == "1"; };
  Output o;
  o.format = fields["format"] == "json" ? Format::Json : Format::Text;
  o.toStderr = flag("stderr");
  o.splitStream = flag("split");
  o.alsoToStderr = flag("also");
  o.stderrThreshold = std::atoi(fields["threshold"].c_str());
  o.fileMaxBytes = std::strtoull(fields["max"].c_str(), nullptr, 10);
  o.skipHeaders = flag("skip");
  o.addDirHeader = flag("dirheader");
  o.backtraceAt = fields["backtrace"];
  o.dir = fields["dir"];
  o.file = fields["file"];
  return o;
}

}  // namespace kpn::logging
