// Collects the log lines of one severity and above while alive (unit/main.cc silences logging
// otherwise). Include it before doctest: it includes glog and drops glog's CHECK macros, so that
// doctest's CHECK is the one meant in the tests.
#pragma once

#include <glog/logging.h>
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace kpn::testing {

class LogCapture : public google::LogSink {
 public:
  explicit LogCapture(google::LogSeverity least = google::GLOG_WARNING)
      : least_(least), oldMinLevel_(FLAGS_minloglevel) {
    for (int sev = google::GLOG_INFO; sev < google::NUM_SEVERITIES; ++sev) google::SetLogDestination(sev, "");
    FLAGS_minloglevel = google::GLOG_INFO;
    google::AddLogSink(this);
  }
  ~LogCapture() override {
    google::RemoveLogSink(this);
    FLAGS_minloglevel = oldMinLevel_;
  }
  void send(google::LogSeverity severity, const char*, const char*, int, const google::LogMessageTime&,
            const char* message, size_t len) override {
    if (severity < least_) return;
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message, len);
  }
  size_t count(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(lines_.begin(), lines_.end(), [&](const std::string& l) { return l.find(needle) != l.npos; });
  }
  bool has(const std::string& a, const std::string& b = "") {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& l) { return l.find(a) != l.npos && l.find(b) != l.npos; });
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  google::LogSeverity least_;
  int oldMinLevel_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace kpn::testing
