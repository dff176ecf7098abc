// The command line as upstream kube-proxy takes it: the argv parser, every upstream flag (logging
// ones included) accepted, --help generated from the one flag table, --version's values.
#include <doctest/doctest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "pkg/config/command_line.h"
#include "pkg/config/flag_table.h"
#include "pkg/config/usage.h"
#include "pkg/config/version.h"

using namespace kpn::config;

namespace {

GivenFlags parsed(const std::vector<std::string>& args) {
  GivenFlags g;
  auto err = parseArgs(args, g);
  REQUIRE_MESSAGE(!err, *err);
  return g;
}

std::string parseErr(const std::vector<std::string>& args) {
  GivenFlags g;
  auto err = parseArgs(args, g);
  REQUIRE_MESSAGE(err, "parsed without error");
  return *err;
}

Loaded loaded(const std::vector<std::string>& args) {
  Loaded l;
  auto err = loadCommandLine(parsed(args), [](const std::string&, std::string*, std::string* e) {
    *e = "no files here";
    return false;
  }, l);
  REQUIRE_MESSAGE(!err, *err);
  return l;
}

std::string loadErr(const std::vector<std::string>& args) {
  Loaded l;
  auto err = loadCommandLine(parsed(args), nullptr, l);
  REQUIRE_MESSAGE(err, "loaded without error");
  return *err;
}

}  // namespace

TEST_CASE("argv: upstream's forms, underscores, gflags' single dash, -v and -h") {
  GivenFlags g = parsed({"--config=/c", "--hostname-override", "n1", "--masquerade-all", "--cleanup-iptables=false",
                         "-v", "3", "--log_file=/l", "-kubeconfig=/k", "--nodeport-addresses=10.0.0.0/8",
                         "--nodeport-addresses", "fd00::/64", "--feature-gates=A=true", "--feature-gates=B=false"});
  CHECK(g == GivenFlags{{"config", "/c"},
                        {"hostname-override", "n1"},
                        {"masquerade-all", "true"},
                        {"cleanup-iptables", "false"},
                        {"v", "3"},
                        {"log-file", "/l"},
                        {"kubeconfig", "/k"},
                        {"nodeport-addresses", "10.0.0.0/8,fd00::/64"},  // list flags add up
                        {"feature-gates", "A=true,B=false"}});
  CHECK(parsed({"-v2"}) == GivenFlags{{"v", "2"}});
  CHECK(parsed({"-v=4", "--v=5"}) == GivenFlags{{"v", "5"}});  // the last one wins
  CHECK(parsed({"-h"}) == GivenFlags{{"help", "true"}});
  CHECK(parsed({"--version"}) == GivenFlags{{"version", "true"}});
  CHECK(parsed({"--version=raw"}) == GivenFlags{{"version", "raw"}});
  CHECK(parsed({"--logtostderr", "--"}) == GivenFlags{{"logtostderr", "true"}});
}

TEST_CASE("argv: what is not a flag is one line naming it") {
  CHECK(parseErr({"--bogus=1"}) == "unknown flag --bogus");
  CHECK(parseErr({"--log-xml"}) == "unknown flag --log-xml");
  CHECK(parseErr({"--kubeconfig"}) == "flag needs an argument: --kubeconfig");
  CHECK(parseErr({"stray"}) == "unexpected argument \"stray\" (only flags are taken)");
  CHECK(parseErr({"--", "stray"}) == "unexpected argument \"stray\" (only flags are taken)");
  // A switch takes its value only after "=": "--masquerade-all false" leaves "false" over, as pflag.
  CHECK(parseErr({"--masquerade-all", "false"}) == "unexpected argument \"false\" (only flags are taken)");
}

TEST_CASE("flags: every logging flag of upstream's kube-proxy (1.2x to 1.3x) is accepted") {
  // logsapi.AddFlags, klog's flags (before 1.26: the kube-proxy reference still lists them),
  // cadvisor's two, verflag's, cobra's help. Each with a value upstream takes.
  const std::vector<std::vector<std::string>> commandLines = {
      {"--logging-format=text"}, {"--logging-format=json"}, {"--log-flush-frequency=1s"}, {"-v=2"}, {"--vmodule=loop=3"},
      {"--logging-format=json", "--log-json-split-stream"}, {"--log-json-info-buffer-size=64Ki"},
      {"--log-text-split-stream=true"}, {"--log-text-info-buffer-size=1M"},
      {"--logtostderr=false", "--log-file=/var/log/kube-proxy.log"}, {"--log_dir=/var/log"}, {"--log-file-max-size=10"},
      {"--alsologtostderr"}, {"--stderrthreshold=WARNING"}, {"--one-output"}, {"--skip-headers"}, {"--skip_log_headers"},
      {"--add-dir-header"}, {"--log-backtrace-at=loop.cc:92"}, {"--boot-id-file=/x"}, {"--machine_id_file=/y"},
  };
  for (const auto& args : commandLines) {
    CAPTURE(args[0]);
    loaded(args);
  }
  Loaded l = loaded({"--logging-format=json", "--log-flush-frequency=250ms", "-v", "3", "--log-json-split-stream"});
  CHECK(l.config.logging.format == "json");
  CHECK(l.config.logging.flushFrequency == std::chrono::milliseconds(250));
  CHECK(l.config.logging.verbosity == 3);
  CHECK(l.config.logging.options.json.splitStream);
  l = loaded({"--logtostderr=false", "--log-file=/f", "--skip-headers", "--add-dir-header", "--stderrthreshold=1"});
  CHECK_FALSE(l.options.klog.logToStderr);
  CHECK(l.options.klog.logFile == "/f");
  CHECK(l.options.klog.skipHeaders);
  CHECK(l.options.klog.addDirHeader);
  CHECK(l.options.klog.stderrThreshold == 1);
}

TEST_CASE("flags: a bad logging value exits naming it, as upstream's validation does") {
  CHECK(loadErr({"--logging-format=xml"}) == "invalid configuration: logging.format: \"xml\": must be text or json");
  CHECK(loadErr({"--log-flush-frequency=soon"}) ==
        "invalid value \"soon\" for --log-flush-frequency: want a Go duration (0s, 250ms, 1m)");
  CHECK(loadErr({"--log-flush-frequency=0s"}) == "invalid configuration: logging.flushFrequency: \"0s\": must be greater than 0");
  CHECK(loadErr({"--log-json-info-buffer-size=lots"}) ==
        "invalid value \"lots\" for --log-json-info-buffer-size: want a quantity (0, 512, 64Ki, 1M)");
  CHECK(loadErr({"--stderrthreshold=LOUD"}) ==
        "invalid value \"LOUD\" for --stderrthreshold: want INFO, WARNING, ERROR, FATAL or 0..3");
  CHECK(loadErr({"--skip-headers=maybe"}) == "invalid value \"maybe\" for --skip-headers: want true or false");
  // Upstream: "Non-default format doesn't honor flag", and vmodule is for the text format only.
  CHECK(loadErr({"--logging-format=json", "--log-file=/f"}) ==
        "invalid configuration: logging.format: \"json\": doesn't honor flag --log-file (klog's, text format only)");
  loaded({"--logging-format=json", "--logtostderr", "--skip-headers=false"});  // klog's defaults are no error
  CHECK(loadErr({"--logging-format=json", "--vmodule=loop=3"}) ==
        "invalid configuration: logging.vmodule: \"json\": only for the text format");
}

TEST_CASE("flags: --config's logging block, with the flags winning as upstream's copyLogsFromFlags") {
  const std::string file = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                           "logging: {format: json, flushFrequency: 2s, verbosity: 1, "
                           "options: {json: {splitStream: true, infoBufferSize: 8Ki}}}\n";
  auto fs = [&](const std::string&, std::string* text, std::string*) {
    *text = file;
    return true;
  };
  Loaded l;
  REQUIRE_FALSE(loadCommandLine(parsed({"--config=/c", "-v=4"}), fs, l));
  CHECK(l.config.logging.format == "json");
  CHECK(l.config.logging.flushFrequency == std::chrono::seconds(2));
  CHECK(l.config.logging.verbosity == 4);
  CHECK(l.config.logging.options.json.splitStream);
  CHECK(l.config.logging.options.json.infoBufferSize == "8Ki");
  REQUIRE_FALSE(loadCommandLine(parsed({"--config=/c", "--logging-format=text", "--log-json-split-stream=false"}), fs, l));
  CHECK(l.config.logging.format == "text");
  CHECK_FALSE(l.config.logging.options.json.splitStream);
  CHECK(l.ignoredFlags.empty());
}

TEST_CASE("flags: each default --help shows is the default the daemon runs with") {
  const Loaded defaults = loaded({});
  for (const FlagSpec& f : flagTable()) {
    if (!*f.defaultText || f.kind == FlagKind::Command) continue;
    CAPTURE(f.name);
    Loaded l = loaded({std::string("--") + f.name + "=" + f.defaultText});
    CHECK(l.config == defaults.config);
    CHECK(l.options.klog.logToStderr == defaults.options.klog.logToStderr);
    CHECK(l.options.klog.stderrThreshold == defaults.options.klog.stderrThreshold);
    CHECK(l.options.klog.logFileMaxSizeMB == defaults.options.klog.logFileMaxSizeMB);
    CHECK(l.options.cleanupIptables == defaults.options.cleanupIptables);
    CHECK(l.options.serviceAccountDir == defaults.options.serviceAccountDir);
  }
}

TEST_CASE("--help: every flag, dashed, with the subcommand, and none of glog's or gflags' internals") {
  const std::string help = usageText();
  for (const FlagSpec& f : flagTable()) {
    CAPTURE(f.name);
    bool listed = help.find(std::string("  --") + f.name) != std::string::npos ||
                  help.find(std::string(", --") + f.name) != std::string::npos;
    CHECK(listed == (f.section != FlagSection::Hidden));
  }
  CHECK(help.find("kube-proxy-nft trace [flags]") != std::string::npos);
  CHECK(help.find("-h, --help") != std::string::npos);
  CHECK(help.find("--metrics-bind-address IP:port   (default 127.0.0.1:10249)") != std::string::npos);
  // What gflags' --help printed: its own and glog's flags, underscored names, the source files.
  for (const std::string internal : {"metrics_bind_address", "minloglevel", "logbuflevel", "flagfile", "helpxml",
                                     "tab_completion", "flags.cc", "logging.cc", "gflags", "/build/", "Flags from"})
    CHECK_MESSAGE(help.find(internal) == std::string::npos, internal);
  // Every line fits a terminal.
  std::regex longLine("[^\n]{101,}");
  CHECK_FALSE(std::regex_search(help, longLine));
}

TEST_CASE("--version: true prints, raw prints every field, vX.Y.Z reports that version, others are errors") {
  const std::string line = "kube-proxy-nft version " + versionLine() + "\n";
  CHECK(answerVersionFlag("true").print == line);
  CHECK(answerVersionFlag("1").print == line);
  CHECK_FALSE(answerVersionFlag("false").print);
  VersionAnswer raw = answerVersionFlag("raw");
  REQUIRE(raw.print);
  CHECK(std::regex_match(*raw.print, std::regex(R"(version\.Info\{Major:"\d+", Minor:"\d+", GitVersion:"v[^"]+", )"
                                                R"(GitCommit:"[^"]+", Compiler:"gcc [^"]+", Platform:"linux/\w+"\}\n)")));
  CHECK(answerVersionFlag("bogus").error == "invalid value \"bogus\" for --version: want true, false, raw or vX.Y.Z");
  const std::string built = version();
  VersionAnswer set = answerVersionFlag("v1.31.0");
  CHECK_FALSE(set.print);
  CHECK_FALSE(set.error);
  CHECK(version() == "1.31.0");
  answerVersionFlag("v" + built);  // back, for the other tests
  CHECK(version() == built);
}

TEST_CASE("flag table: names are upstream's dashed spelling, unique, and every section has a title") {
  std::set<std::string> names;
  for (const FlagSpec& f : flagTable()) {
    CAPTURE(f.name);
    CHECK(names.insert(f.name).second);
    CHECK(std::string(f.name).find('_') == std::string::npos);
    CHECK(*f.help);
  }
}
