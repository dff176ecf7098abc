// The command line -> ProxyConfig + DaemonOptions, by upstream's precedence
// (cmd/kube-proxy/app/options.go, Complete):
//   - without --config, every flag given overrides the default of its field; --iptables-sync-period
//     and --iptables-min-sync-period apply unless the mode is ipvs, --ipvs-* ones only in ipvs
//     mode; the deprecated --healthz-port/--metrics-port (0 disables) apply unless --config or
//     --write-config-to is given;
//   - with --config, the file replaces the flag-built configuration whole: every flag that maps to
//     a field is ignored (we log their names), except the logging flags (--v, --vmodule: flags
//     win) and --hostname-override, which overrides the file's hostnameOverride (trimmed and
//     lowercased; blank is an error);
//   - flags with no field (--master, --cleanup, --write-config-to, our --manifests, --dry-run, ...)
//     apply either way.
// Flags are named as upstream spells them, with dashes; every flag is in pkg/config/flag_table.h.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

// The flags that were given, by dashed name, with their value as text ("true"/"false" for bools).
using GivenFlags = std::map<std::string, std::string>;

struct Loaded {
  ProxyConfig config;
  DaemonOptions options;
  std::vector<std::string> ignoredFlags;  // given beside --config and dropped, as upstream drops them
  std::vector<std::string> warnings;      // klog flags that have no effect as given, ...
};

// Reads a file's text; false with *error set when it cannot.
using ReadFile = std::function<bool(const std::string& path, std::string* text, std::string* error)>;

// The arguments after the program name -> the flags given, by their table name, as text. Upstream's
// syntax (pflag): --name=value, --name value, a switch alone (--masquerade-all) or --name=false,
// -v N / -v=N / -vN, -h; names spelled with underscores too (--log_file, as upstream normalises
// them) or with one dash (-config=FILE, as gflags took them); "--" ends the flags. A flag given
// twice: the last value, or for a list flag both joined with ",". Returns one error line for an
// unknown flag, a missing value or an argument that is not a flag.
std::optional<std::string> parseArgs(const std::vector<std::string>& args, GivenFlags& out);

// Returns one error line naming the flag or field (and the file), or nullopt with `out` filled and
// validated. --help and --version are not handled here (see usage.h, version.h).
std::optional<std::string> loadCommandLine(const GivenFlags& flags, const ReadFile& readFile, Loaded& out);

}  // namespace kpn::config
