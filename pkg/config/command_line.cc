#include "pkg/config/command_line.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

#include "pkg/config/decode.h"
#include "pkg/config/validate.h"
#include "pkg/render/node_config.h"
#include "pkg/sync/duration.h"

namespace kpn::config {

namespace {

struct FlagError {
  std::string text;
};

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& want) {
  throw FlagError{"invalid value \"" + value + "\" for --" + flag + ": " + want};
}

bool toBool(const std::string& flag, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  bad(flag, v, "want true or false");
}

int32_t toInt32(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno == ERANGE || n < INT32_MIN || n > INT32_MAX) bad(flag, v, "want a 32-bit integer");
  return static_cast<int32_t>(n);
}

float toFloat(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  float f = std::strtof(v.c_str(), &end);
  if (v.empty() || *end) bad(flag, v, "want a number");
  return f;
}

Duration toDuration(const std::string& flag, const std::string& v) {
  auto d = sync::parseGoDuration(v);
  if (!d) bad(flag, v, "want a Go duration (0s, 250ms, 1m)");
  return *d;
}

std::vector<std::string> splitComma(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// --feature-gates=A=true,B=false
std::map<std::string, bool> toGates(const std::string& flag, const std::string& v) {
  std::map<std::string, bool> gates;
  for (const std::string& kv : splitComma(v)) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) bad(flag, v, "want NAME=true|false,...");
    gates[kv.substr(0, eq)] = toBool(flag, kv.substr(eq + 1));
  }
  return gates;
}

// --vmodule=pattern=N,... (glog's syntax) -> logging.vmodule entries.
std::vector<VModule> toVModule(const std::string& flag, const std::string& v) {
  std::vector<VModule> out;
  for (const std::string& kv : splitComma(v)) {
    size_t eq = kv.rfind('=');
    if (eq == std::string::npos || eq == 0) bad(flag, v, "want PATTERN=N,...");
    out.push_back({kv.substr(0, eq), toInt32(flag, kv.substr(eq + 1))});
  }
  return out;
}

// Today's lenient --nodeport-addresses: bad entries are skipped with a warning (render's parser
// says which); what is left is kept as the field's list.
std::vector<std::string> toNodePortAddresses(const std::string& v, std::vector<std::string>& warnings) {
  render::NodeConfig scratch;
  for (const std::string& w : render::parseNodePortAddresses(v, scratch)) warnings.push_back(w);
  std::vector<std::string> out;
  for (const net::Cidr& c : scratch.nodePortCidrs) out.push_back(c.str());
  if (out.empty() && v.find("primary") != std::string::npos) out.push_back("primary");
  return out;
}

enum class Kind {
  Field,    // maps to a KubeProxyConfiguration field: ignored beside --config
  Daemon,   // no field: applies either way
  Logging,  // flags win over the file
};

struct Flag {
  const char* name;
  Kind kind;
  std::function<void(Loaded&, const std::string& value)> apply;
};

using S = const std::string&;

const std::vector<Flag>& flagTable() {
  static const std::vector<Flag> table = {
      // Daemon options.
      {"config", Kind::Daemon, [](Loaded& l, S v) { l.options.configFile = v; }},
      {"write-config-to", Kind::Daemon, [](Loaded& l, S v) { l.options.writeConfigTo = v; }},
      {"master", Kind::Daemon, [](Loaded& l, S v) { l.options.master = v; }},
      {"kubeconfig-context", Kind::Daemon, [](Loaded& l, S v) { l.options.kubeconfigContext = v; }},
      {"service-account-dir", Kind::Daemon, [](Loaded& l, S v) { l.options.serviceAccountDir = v; }},
      {"manifests", Kind::Daemon, [](Loaded& l, S v) { l.options.manifests = v; }},
      {"dry-run", Kind::Daemon, [](Loaded& l, S v) { l.options.dryRun = toBool("dry-run", v); }},
      {"cleanup", Kind::Daemon, [](Loaded& l, S v) { l.options.cleanup = toBool("cleanup", v); }},
      {"cleanup-iptables", Kind::Daemon,
       [](Loaded& l, S v) { l.options.cleanupIptables = toBool("cleanup-iptables", v); }},
      {"init-only", Kind::Daemon, [](Loaded& l, S v) { l.options.initOnly = toBool("init-only", v); }},
      {"endpoint-connection-metrics", Kind::Daemon,
       [](Loaded& l, S v) { l.options.endpointConnectionMetrics = toBool("endpoint-connection-metrics", v); }},
      {"probe-fake-requirement", Kind::Daemon,
       [](Loaded& l, S v) { l.options.probeFakeRequirements = splitComma(v); }},
      // Logging.
      {"v", Kind::Logging, [](Loaded& l, S v) { l.config.logging.verbosity = toInt32("v", v); }},
      {"vmodule", Kind::Logging,
       [](Loaded& l, S v) {
         for (const VModule& m : toVModule("vmodule", v)) l.config.logging.vmodule.push_back(m);
       }},
      // KubeProxyConfiguration fields.
      {"kubeconfig", Kind::Field, [](Loaded& l, S v) { l.config.clientConnection.kubeconfig = v; }},
      {"kube-api-qps", Kind::Field, [](Loaded& l, S v) { l.config.clientConnection.qps = toFloat("kube-api-qps", v); }},
      {"kube-api-burst", Kind::Field, [](Loaded& l, S v) { l.config.clientConnection.burst = toInt32("kube-api-burst", v); }},
      {"kube-api-content-type", Kind::Field, [](Loaded& l, S v) { l.config.clientConnection.contentType = v; }},
      {"feature-gates", Kind::Field, [](Loaded& l, S v) { l.config.featureGates = toGates("feature-gates", v); }},
      {"bind-address", Kind::Field, [](Loaded& l, S v) { l.config.bindAddress = v; }},
      {"healthz-bind-address", Kind::Field, [](Loaded& l, S v) { l.config.healthzBindAddress = v; }},
      {"metrics-bind-address", Kind::Field, [](Loaded& l, S v) { l.config.metricsBindAddress = v; }},
      {"bind-address-hard-fail", Kind::Field,
       [](Loaded& l, S v) { l.config.bindAddressHardFail = toBool("bind-address-hard-fail", v); }},
      {"profiling", Kind::Field, [](Loaded& l, S v) { l.config.enableProfiling = toBool("profiling", v); }},
      {"show-hidden-metrics-for-version", Kind::Field, [](Loaded& l, S v) { l.config.showHiddenMetricsForVersion = v; }},
      {"proxy-mode", Kind::Field, [](Loaded& l, S v) { l.config.mode = v; }},
      {"iptables-masquerade-bit", Kind::Field,
       [](Loaded& l, S v) {
         l.config.iptables.masqueradeBit = l.config.nftables.masqueradeBit = toInt32("iptables-masquerade-bit", v);
       }},
      {"masquerade-all", Kind::Field,
       [](Loaded& l, S v) { l.config.iptables.masqueradeAll = l.config.nftables.masqueradeAll = toBool("masquerade-all", v); }},
      {"iptables-localhost-nodeports", Kind::Field,
       [](Loaded& l, S v) { l.config.iptables.localhostNodePorts = toBool("iptables-localhost-nodeports", v); }},
      // Sync periods: see applyFlags for which of these apply in which mode.
      {"iptables-sync-period", Kind::Field, nullptr},
      {"iptables-min-sync-period", Kind::Field, nullptr},
      {"ipvs-sync-period", Kind::Field, nullptr},
      {"ipvs-min-sync-period", Kind::Field, nullptr},
      {"sync-period", Kind::Field, nullptr},
      {"min-sync-period", Kind::Field, nullptr},
      {"ipvs-scheduler", Kind::Field, [](Loaded& l, S v) { l.config.ipvs.scheduler = v; }},
      {"scheduler", Kind::Field, [](Loaded& l, S v) { l.config.ipvs.scheduler = v; }},
      {"ipvs-exclude-cidrs", Kind::Field, [](Loaded& l, S v) { l.config.ipvs.excludeCIDRs = splitComma(v); }},
      {"ipvs-strict-arp", Kind::Field, [](Loaded& l, S v) { l.config.ipvs.strictARP = toBool("ipvs-strict-arp", v); }},
      {"ipvs-tcp-timeout", Kind::Field, [](Loaded& l, S v) { l.config.ipvs.tcpTimeout = toDuration("ipvs-tcp-timeout", v); }},
      {"ipvs-tcpfin-timeout", Kind::Field,
       [](Loaded& l, S v) { l.config.ipvs.tcpFinTimeout = toDuration("ipvs-tcpfin-timeout", v); }},
      {"ipvs-udp-timeout", Kind::Field, [](Loaded& l, S v) { l.config.ipvs.udpTimeout = toDuration("ipvs-udp-timeout", v); }},
      {"detect-local-mode", Kind::Field, [](Loaded& l, S v) { l.config.detectLocalMode = v; }},
      {"pod-bridge-interface", Kind::Field, [](Loaded& l, S v) { l.config.detectLocal.bridgeInterface = v; }},
      {"pod-interface-name-prefix", Kind::Field, [](Loaded& l, S v) { l.config.detectLocal.interfaceNamePrefix = v; }},
      {"cluster-cidr", Kind::Field, [](Loaded& l, S v) { l.config.clusterCIDR = v; }},
      {"nodeport-addresses", Kind::Field,
       [](Loaded& l, S v) { l.config.nodePortAddresses = toNodePortAddresses(v, l.warnings); }},
      {"oom-score-adj", Kind::Field, [](Loaded& l, S v) { l.config.oomScoreAdj = toInt32("oom-score-adj", v); }},
      {"conntrack-max-per-core", Kind::Field,
       [](Loaded& l, S v) { l.config.conntrack.maxPerCore = toInt32("conntrack-max-per-core", v); }},
      {"conntrack-min", Kind::Field, [](Loaded& l, S v) { l.config.conntrack.min = toInt32("conntrack-min", v); }},
      {"conntrack-tcp-timeout-established", Kind::Field,
       [](Loaded& l, S v) { l.config.conntrack.tcpEstablishedTimeout = toDuration("conntrack-tcp-timeout-established", v); }},
      {"conntrack-tcp-timeout-close-wait", Kind::Field,
       [](Loaded& l, S v) { l.config.conntrack.tcpCloseWaitTimeout = toDuration("conntrack-tcp-timeout-close-wait", v); }},
      {"conntrack-tcp-be-liberal", Kind::Field,
       [](Loaded& l, S v) { l.config.conntrack.tcpBeLiberal = toBool("conntrack-tcp-be-liberal", v); }},
      {"conntrack-udp-timeout", Kind::Field,
       [](Loaded& l, S v) { l.config.conntrack.udpTimeout = toDuration("conntrack-udp-timeout", v); }},
      {"conntrack-udp-timeout-stream", Kind::Field,
       [](Loaded& l, S v) { l.config.conntrack.udpStreamTimeout = toDuration("conntrack-udp-timeout-stream", v); }},
      {"config-sync-period", Kind::Field,
       [](Loaded& l, S v) { l.config.configSyncPeriod = toDuration("config-sync-period", v); }},
      {"healthz-port", Kind::Field, nullptr},  // deprecated: see applyDeprecatedPorts
      {"metrics-port", Kind::Field, nullptr},
      {"hostname-override", Kind::Daemon, nullptr},  // special: see applyHostnameOverride
  };
  return table;
}

// processV1Alpha1Flags: the mode decides which sync-period flags count; ours (--sync-period,
// --min-sync-period, what main has always had) win over upstream's mode-named ones.
void applySyncPeriods(const GivenFlags& flags, ProxyConfig& c) {
  bool ipvs = c.mode == "ipvs";
  auto given = [&](const char* n) { return flags.count(n) > 0; };
  if (!ipvs && given("iptables-sync-period"))
    c.iptables.syncPeriod = c.nftables.syncPeriod = toDuration("iptables-sync-period", flags.at("iptables-sync-period"));
  if (!ipvs && given("iptables-min-sync-period"))
    c.iptables.minSyncPeriod = c.nftables.minSyncPeriod =
        toDuration("iptables-min-sync-period", flags.at("iptables-min-sync-period"));
  if (ipvs && given("ipvs-sync-period"))
    c.ipvs.syncPeriod = c.nftables.syncPeriod = toDuration("ipvs-sync-period", flags.at("ipvs-sync-period"));
  if (ipvs && given("ipvs-min-sync-period"))
    c.ipvs.minSyncPeriod = c.nftables.minSyncPeriod = toDuration("ipvs-min-sync-period", flags.at("ipvs-min-sync-period"));
  if (given("sync-period")) c.nftables.syncPeriod = toDuration("sync-period", flags.at("sync-period"));
  if (given("min-sync-period")) c.nftables.minSyncPeriod = toDuration("min-sync-period", flags.at("min-sync-period"));
}

// addressFromDeprecatedFlags: port 0 disables the server, else the port is appended to an
// address that has none.
void applyDeprecatedPorts(const GivenFlags& flags, ProxyConfig& c) {
  auto port = [&](const char* n, int def) { return flags.count(n) ? toInt32(n, flags.at(n)) : def; };
  int hp = port("healthz-port", 10256), mp = port("metrics-port", 10249);
  c.healthzBindAddress = hp == 0 ? "" : appendPortIfNeeded(c.healthzBindAddress, hp);
  c.metricsBindAddress = mp == 0 ? "" : appendPortIfNeeded(c.metricsBindAddress, mp);
}

// processHostnameOverrideFlag: the flag, when given non-empty, wins over the file.
void applyHostnameOverride(const GivenFlags& flags, ProxyConfig& c) {
  auto it = flags.find("hostname-override");
  if (it == flags.end() || it->second.empty()) return;
  size_t b = it->second.find_first_not_of(" \t\r\n"), e = it->second.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) throw FlagError{"--hostname-override: an empty (blank) value is invalid"};
  std::string name = it->second.substr(b, e - b + 1);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  c.hostnameOverride = name;
}

}  // namespace

const std::vector<std::string>& knownFlagNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Flag& f : flagTable()) v.push_back(f.name);
    return v;
  }();
  return names;
}

std::optional<std::string> loadCommandLine(const GivenFlags& flags, const ReadFile& readFile, Loaded& out) {
  Loaded l;
  try {
    for (const auto& [name, value] : flags) {
      const Flag* flag = nullptr;
      for (const Flag& f : flagTable())
        if (name == f.name) flag = &f;
      if (!flag) return "unknown flag --" + name;
      if (flag->kind == Kind::Daemon && flag->apply) flag->apply(l, value);
    }
    if (!l.options.configFile.empty()) {
      std::string text, error;
      if (!readFile(l.options.configFile, &text, &error)) return "--config=" + l.options.configFile + ": " + error;
      if (auto err = decodeProxyConfig(text, l.config)) return "--config=" + l.options.configFile + ": " + *err;
      for (const auto& [name, value] : flags)
        for (const Flag& f : flagTable())
          if (name == f.name && f.kind == Kind::Field) l.ignoredFlags.push_back("--" + name);
      // copyLogsFromFlags: the logging flags given win; vmodule entries add to the file's.
      for (const Flag& f : flagTable())
        if (f.kind == Kind::Logging && flags.count(f.name)) f.apply(l, flags.at(f.name));
    } else {
      for (const auto& [name, value] : flags)
        for (const Flag& f : flagTable())
          if (name == f.name && f.kind != Kind::Daemon && f.apply) f.apply(l, value);
      applySyncPeriods(flags, l.config);
      if (l.options.writeConfigTo.empty()) applyDeprecatedPorts(flags, l.config);
    }
    applyHostnameOverride(flags, l.config);
  } catch (const FlagError& e) {
    return e.text;
  }
  std::vector<std::string> errors = validate(l.config);
  if (!errors.empty()) {
    std::string line = l.options.configFile.empty() ? "invalid configuration" : "--config=" + l.options.configFile;
    for (size_t i = 0; i < errors.size(); ++i) line += (i ? "; " : ": ") + errors[i];
    return line;
  }
  out = std::move(l);
  return std::nullopt;
}

}  // namespace kpn::config
