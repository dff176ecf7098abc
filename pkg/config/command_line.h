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
// Flags are named as upstream spells them, with dashes; gflags-free so that it is unit-tested.
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
  std::vector<std::string> warnings;      // bad --nodeport-addresses entries skipped, ...
};

// Reads a file's text; false with *error set when it cannot.
using ReadFile = std::function<bool(const std::string& path, std::string* text, std::string* error)>;

// Returns one error line naming the flag or field (and the file), or nullopt with `out` filled and
// validated.
std::optional<std::string> loadCommandLine(const GivenFlags& flags, const ReadFile& readFile, Loaded& out);

// The flag names loadCommandLine understands, dashed (the gflags definitions must match).
const std::vector<std::string>& knownFlagNames();

}  // namespace kpn::config
