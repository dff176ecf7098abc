#include "pkg/config/command_line.h"

#include <cctype>

#include "pkg/config/decode.h"
#include "pkg/config/flag_table.h"
#include "pkg/config/flag_values.h"
#include "pkg/config/validate.h"

namespace kpn::config {

namespace {

std::string dashed(std::string name) {
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

// -v2 (pflag's shorthand with its value attached).
bool isVerbosityShorthand(const std::string& name) {
  return name.size() > 1 && name[0] == 'v' && name.find_first_not_of("0123456789", 1) == std::string::npos;
}

// processV1Alpha1Flags: the mode decides which sync-period flags count; ours (--sync-period,
// --min-sync-period, what main has always had) win over upstream's mode-named ones.
void applySyncPeriods(const GivenFlags& flags, ProxyConfig& c) {
  bool ipvs = c.mode == "ipvs";
  auto given = [&](const char* n) { return flags.count(n) > 0; };
  if (!ipvs && given("iptables-sync-period"))
    c.iptables.syncPeriod = c.nftables.syncPeriod = flagDuration("iptables-sync-period", flags.at("iptables-sync-period"));
  if (!ipvs && given("iptables-min-sync-period"))
    c.iptables.minSyncPeriod = c.nftables.minSyncPeriod =
        flagDuration("iptables-min-sync-period", flags.at("iptables-min-sync-period"));
  if (ipvs && given("ipvs-sync-period"))
    c.ipvs.syncPeriod = c.nftables.syncPeriod = flagDuration("ipvs-sync-period", flags.at("ipvs-sync-period"));
  if (ipvs && given("ipvs-min-sync-period"))
    c.ipvs.minSyncPeriod = c.nftables.minSyncPeriod = flagDuration("ipvs-min-sync-period", flags.at("ipvs-min-sync-period"));
  if (given("sync-period")) c.nftables.syncPeriod = flagDuration("sync-period", flags.at("sync-period"));
  if (given("min-sync-period")) c.nftables.minSyncPeriod = flagDuration("min-sync-period", flags.at("min-sync-period"));
}

// addressFromDeprecatedFlags: port 0 disables the server, else the port is appended to an
// address that has none.
void applyDeprecatedPorts(const GivenFlags& flags, ProxyConfig& c) {
  auto port = [&](const char* n, int def) { return flags.count(n) ? flagInt32(n, flags.at(n)) : def; };
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

std::optional<std::string> parseArgs(const std::vector<std::string>& args, GivenFlags& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (i + 1 < args.size()) return "unexpected argument \"" + args[i + 1] + "\" (only flags are taken)";
      break;
    }
    if (a.size() < 2 || a[0] != '-') return "unexpected argument \"" + a + "\" (only flags are taken)";
    const bool oneDash = a[1] != '-';
    const std::string body = a.substr(oneDash ? 1 : 2);
    const size_t eq = body.find('=');
    std::string name = dashed(body.substr(0, eq));
    std::optional<std::string> value;
    if (eq != std::string::npos) value = body.substr(eq + 1);
    if (oneDash && name == "h") name = "help";
    const FlagSpec* spec = findFlag(name);
    if (!spec && oneDash && !value && isVerbosityShorthand(name)) {
      value = name.substr(1);
      spec = findFlag(name = "v");
    }
    if (!spec) return "unknown flag " + a.substr(0, a.find('='));
    if (!value) {
      if (const char* bare = valueWhenBare(*spec))
        value = bare;
      else if (i + 1 < args.size())
        value = args[++i];
      else
        return "flag needs an argument: --" + name;
    }
    auto [it, inserted] = out.emplace(name, *value);
    if (!inserted) it->second = spec->list ? it->second + "," + *value : *value;
  }
  return std::nullopt;
}

std::optional<std::string> loadCommandLine(const GivenFlags& flags, const ReadFile& readFile, Loaded& out) {
  Loaded l;
  try {
    for (const auto& [name, value] : flags) {
      const FlagSpec* flag = findFlag(name);
      if (!flag) return "unknown flag --" + name;
      // Daemon and klog flags have no field: they apply with or without --config.
      if ((flag->kind == FlagKind::Daemon || flag->kind == FlagKind::Klog) && flag->apply) flag->apply(l, value);
    }
    if (!l.options.configFile.empty()) {
      std::string text, error;
      if (!readFile(l.options.configFile, &text, &error)) return "--config=" + l.options.configFile + ": " + error;
      if (auto err = decodeProxyConfig(text, l.config)) return "--config=" + l.options.configFile + ": " + *err;
      for (const auto& [name, value] : flags)
        if (findFlag(name)->kind == FlagKind::Field) l.ignoredFlags.push_back("--" + name);
      // copyLogsFromFlags: the logging flags given win; vmodule entries add to the file's.
      for (const auto& [name, value] : flags)
        if (findFlag(name)->kind == FlagKind::Logging) findFlag(name)->apply(l, value);
    } else {
      for (const auto& [name, value] : flags) {
        const FlagSpec* f = findFlag(name);
        if ((f->kind == FlagKind::Field || f->kind == FlagKind::Logging) && f->apply) f->apply(l, value);
      }
      applySyncPeriods(flags, l.config);
      if (l.options.writeConfigTo.empty()) applyDeprecatedPorts(flags, l.config);
    }
    applyHostnameOverride(flags, l.config);
  } catch (const FlagError& e) {
    return e.text;
  }
  std::vector<std::string> errors = validate(l.config);
  // As upstream's logging validation: a format other than text honours none of klog's flags, so
  // one given with a value other than its default is an error.
  if (l.config.logging.format != "text")
    for (const auto& [name, value] : flags) {
      const FlagSpec* f = findFlag(name);
      if (f->kind != FlagKind::Klog) continue;
      Loaded alone;
      f->apply(alone, value);  // parsed above already: cannot throw
      if (alone.options.klog != KlogFlags{})
        errors.push_back("logging.format: \"" + l.config.logging.format + "\": doesn't honor flag --" + name +
                         " (klog's, text format only)");
    }
  if (!errors.empty()) {
    std::string line = l.options.configFile.empty() ? "invalid configuration" : "--config=" + l.options.configFile;
    for (size_t i = 0; i < errors.size(); ++i) line += (i ? "; " : ": ") + errors[i];
    return line;
  }
  out = std::move(l);
  return std::nullopt;
}

}  // namespace kpn::config
