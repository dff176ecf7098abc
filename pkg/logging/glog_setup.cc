#include "pkg/logging/glog_setup.h"

// glog 0.6 declares its prefix callback only with this defined (Debian's library has it).
#define GLOG_CUSTOM_PREFIX_SUPPORT
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "pkg/logging/klog_line.h"

namespace kpn::logging {

namespace {

// Inherited by the processes the daemon starts (the libnftables helper): they log as it does.
constexpr const char* kOutputVariable = "KPN_LOG_OUTPUT";

void klogPrefix(std::ostream& s, const google::LogMessageInfo& l, void*) {
  s << klogHeader(l.severity[0], l.time.tm(), l.time.usec(), l.thread_id, l.filename, l.line_number);
}

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report a failing log stream
    off += static_cast<size_t>(n);
  }
}

// Every line glog logs, formatted and written where the Output says. glog calls send() on the
// logging thread, from several threads at once: one mutex around the writes.
class KlogSink : public google::LogSink {
 public:
  void configure(const Output& o) {
    std::lock_guard<std::mutex> lk(mu_);
    out_ = o;
    if (fileFd_ >= 0) ::close(fileFd_);
    fileFd_ = -1;
    fileTried_ = false;
  }

  void send(google::LogSeverity severity, const char* fullFilename, const char*, int line,
            const google::LogMessageTime& t, const char* message, size_t length) override {
    LogLine l;
    l.severity = google::GetLogSeverityName(severity)[0];
    l.local = t.tm();
    l.usec = t.usec();
    l.epochUsec = static_cast<int64_t>(t.timestamp()) * 1000000 + t.usec();
    l.threadId = static_cast<int64_t>(::syscall(SYS_gettid));
    l.file = fullFilename;
    l.line = line;
    l.message = std::string_view(message, length);
    std::lock_guard<std::mutex> lk(mu_);
    const std::string text = out_.format == Format::Json ? jsonLine(l) : textLine(l, {out_.skipHeaders, out_.addDirHeader});
    if (out_.toStderr) {
      writeAll(out_.splitStream && severity < google::GLOG_ERROR ? 1 : 2, text);
      return;
    }
    if (!out_.file.empty()) toFile(text);
    if (out_.alsoToStderr || severity >= out_.stderrThreshold) writeAll(2, text);
  }

 private:
  // klog's --log-file: appended to, and past its size limit it starts over. Opened with the first
  // line, not before: the libnftables helper closes every descriptor it inherits before it logs.
  void toFile(const std::string& text) {
    if (fileFd_ < 0 && !fileTried_) {
      fileTried_ = true;
      fileFd_ = ::open(out_.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fileFd_ < 0) writeAll(2, "cannot open --log-file=" + out_.file + ": " + std::strerror(errno) + "\n");
      struct stat st {};
      fileBytes_ = fileFd_ >= 0 && fstat(fileFd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    }
    if (fileFd_ < 0) return;
    if (out_.fileMaxBytes && fileBytes_ + text.size() > out_.fileMaxBytes) {
      if (::ftruncate(fileFd_, 0) == 0) fileBytes_ = 0;
    }
    writeAll(fileFd_, text);
    fileBytes_ += text.size();
  }

  std::mutex mu_;
  Output out_;
  int fileFd_ = -1;
  bool fileTried_ = false;
  uint64_t fileBytes_ = 0;
};

KlogSink& sink() {
  static KlogSink* s = new KlogSink;  // never destroyed: threads may log while the process exits
  return *s;
}

void route(const Output& o) {
  static bool added = false;
  sink().configure(o);
  if (!added) google::AddLogSink(&sink());
  added = true;
  // glog itself writes nothing to the streams any more (the sink does) and files only for
  // --log-dir, with klog's header (the prefix callback) unless --skip-headers.
  FLAGS_logtostderr = false;
  FLAGS_alsologtostderr = false;
  FLAGS_stderrthreshold = google::NUM_SEVERITIES;
  FLAGS_log_prefix = !o.skipHeaders;
  if (o.nativeFiles()) {
    FLAGS_log_dir = o.dir;
    FLAGS_max_log_size = o.fileMaxBytes == 0 ? 4095 : static_cast<uint32_t>(std::min<uint64_t>(o.fileMaxBytes >> 20, 4095));
  } else {
    for (int s = 0; s < google::NUM_SEVERITIES; ++s) google::SetLogDestination(s, "");
  }
  if (!o.backtraceAt.empty()) gflags::SetCommandLineOption("log_backtrace_at", o.backtraceAt.c_str());
}

}  // namespace

void startLogging(const char* argv0) {
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv0, klogPrefix);
  const char* inherited = std::getenv(kOutputVariable);
  if (auto o = inherited ? decodeOutput(inherited) : std::nullopt) route(*o);
}

void applyLogging(const Output& output, const config::Logging& logging) {
  FLAGS_v = logging.verbosity;
  for (const config::VModule& m : logging.vmodule) google::SetVLOGLevel(m.filePattern.c_str(), m.verbosity);
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(logging.flushFrequency + std::chrono::milliseconds(999));
  FLAGS_logbufsecs = static_cast<int32_t>(std::min<int64_t>(secs.count(), INT32_MAX));
  route(output);
  ::setenv(kOutputVariable, encodeOutput(output).c_str(), 1);
}

}  // namespace kpn::logging
