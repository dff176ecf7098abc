// Log lines as klog writes them (text header, JSON shape) and where they go (klog's flags,
// split streams), without glog: the pure half of pkg/logging.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <regex>

#include "pkg/logging/klog_line.h"
#include "pkg/logging/output.h"

using namespace kpn::logging;

namespace {

LogLine sample(char severity, const char* message) {
  LogLine l;
  l.severity = severity;
  l.local.tm_mon = 11;  // December
  l.local.tm_mday = 5;
  l.local.tm_hour = 4;
  l.local.tm_min = 2;
  l.local.tm_sec = 52;
  l.usec = 754104;
  l.epochUsec = 1733371372754104;
  l.threadId = 13305;
  l.file = "pkg/sync/loop.cc";
  l.line = 92;
  l.message = message;
  return l;
}

// klog's header: severity, mmdd, time to the microsecond, the id right-aligned in 7 columns.
const std::regex kKlogHeader(R"(^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} [ \d]{7} [^ :\]]+:\d+\] )");

}  // namespace

TEST_CASE("klog text: the header klog writes, not glog's (no year, 7-column thread id)") {
  CHECK(textLine(sample('I', "sync done")) == "I1205 04:02:52.754104   13305 loop.cc:92] sync done\n");
  CHECK(textLine(sample('E', "x")).rfind("E1205 04:02:52.754104   13305 loop.cc:92] x", 0) == 0);
  LogLine wide = sample('W', "m");
  wide.threadId = 1234567;
  wide.usec = 42;
  CHECK(textLine(wide) == "W1205 04:02:52.000042 1234567 loop.cc:92] m\n");
  CHECK(std::regex_search(textLine(sample('I', "a")), kKlogHeader));
  // glog 0.6's own header fails the same pattern: the year and a 5-column id.
  CHECK_FALSE(std::regex_search(std::string("I20261205 04:02:52.754104 13305 loop.cc:92] a"), kKlogHeader));
}

TEST_CASE("klog text: --skip-headers and --add-dir-header; a message keeps its own newline") {
  CHECK(textLine(sample('I', "bare"), {true, false}) == "bare\n");
  CHECK(textLine(sample('I', "dir"), {false, true}) == "I1205 04:02:52.754104   13305 sync/loop.cc:92] dir\n");
  CHECK(textLine(sample('I', "two\nlines\n")) == "I1205 04:02:52.754104   13305 loop.cc:92] two\nlines\n");
  CHECK(shortFile("pkg/sync/loop.cc") == "sync/loop.cc");
  CHECK(shortFile("loop.cc") == "loop.cc");
  CHECK(shortFile("/abs/x.cc") == "abs/x.cc");
}

TEST_CASE("klog json: component-base's shape, one object per line") {
  std::string line = jsonLine(sample('I', "first sync: 4 services, \"quoted\"\tand a tab"));
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  CHECK(line.rfind("{\"ts\":1733371372754.104,\"caller\":\"sync/loop.cc:92\",\"msg\":", 0) == 0);
  rapidjson::Document d;
  REQUIRE_FALSE(d.Parse(line.c_str()).HasParseError());
  CHECK(d["ts"].GetDouble() == doctest::Approx(1733371372754.104));
  CHECK(std::string(d["caller"].GetString()) == "sync/loop.cc:92");
  CHECK(std::string(d["msg"].GetString()) == "first sync: 4 services, \"quoted\"\tand a tab");
  CHECK(d["v"].GetInt() == 0);
  CHECK(d.MemberCount() == 4);
  // Warnings are info lines to klog's JSON logger; errors carry no "v" (and no "err": our errors
  // are text, not error values).
  rapidjson::Document w, e;
  w.Parse(jsonLine(sample('W', "w")).c_str());
  e.Parse(jsonLine(sample('E', "failed: connect: Connection refused (111)\n")).c_str());
  CHECK(w["v"].GetInt() == 0);
  CHECK_FALSE(e.HasMember("v"));
  CHECK(std::string(e["msg"].GetString()) == "failed: connect: Connection refused (111)");
  // ts drops trailing zeros, as zap's float encoding does.
  LogLine whole = sample('I', "x");
  whole.epochUsec = 1733371372754000;
  CHECK(jsonLine(whole).rfind("{\"ts\":1733371372754,", 0) == 0);
}

TEST_CASE("output: klog's rules for streams and files, upstream's split streams") {
  kpn::config::Logging logging;
  kpn::config::KlogFlags klog;
  Output o = outputOf(logging, klog);
  CHECK(o.format == Format::Text);
  CHECK(o.toStderr);
  CHECK_FALSE(o.splitStream);
  CHECK_FALSE(o.nativeFiles());
  logging.format = "json";
  logging.options.json.splitStream = true;
  logging.options.text.splitStream = false;
  o = outputOf(logging, klog);
  CHECK(o.format == Format::Json);
  CHECK(o.splitStream);  // the json options for the json format
  std::vector<std::string> notes;
  klog.logFile = "/var/log/kp.log";
  o = outputOf({}, klog, &notes);
  CHECK(o.toStderr);  // klog: --log-file has no effect while --logtostderr is true
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "--log-file=/var/log/kp.log has no effect while --logtostderr is true (klog's rule); add --logtostderr=false");
  klog.logToStderr = false;
  notes.clear();
  o = outputOf({}, klog, &notes);
  CHECK(notes.empty());
  CHECK(o.file == "/var/log/kp.log");
  CHECK_FALSE(o.nativeFiles());
  klog.logFile.clear();
  klog.logDir = "/var/log";
  CHECK(outputOf({}, klog).nativeFiles());
}

TEST_CASE("output: the helper process reads back exactly what the daemon wrote") {
  Output o;
  o.format = Format::Json;
  o.toStderr = false;
  o.splitStream = true;
  o.alsoToStderr = true;
  o.stderrThreshold = 1;
  o.file = "/var/log/a=b;c.log";
  o.fileMaxBytes = 10 << 20;
  o.dir = "/tmp/x";
  o.skipHeaders = true;
  o.addDirHeader = true;
  o.backtraceAt = "loop.cc:92";
  auto back = decodeOutput(encodeOutput(o));
  REQUIRE(back);
  CHECK(*back == o);
  CHECK(*decodeOutput(encodeOutput(Output{})) == Output{});
  CHECK_FALSE(decodeOutput("format=json"));
  CHECK_FALSE(decodeOutput("garbage"));
}
