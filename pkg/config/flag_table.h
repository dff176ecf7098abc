// Every flag the daemon takes, in one table: its name (upstream's, dashed), what kind of setting it
// is (for --config's precedence), how --help shows it, and what it sets. The argv parser, the
// precedence rules (command_line.h) and --help (usage.h) all read this table; nothing else lists
// flags. What a flag of a KubeProxyConfiguration field sets comes from fields.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pkg/config/command_line.h"

namespace kpn::config {

enum class FlagKind {
  Field,    // maps to a KubeProxyConfiguration field: ignored beside --config
  Daemon,   // no field: applies either way
  Logging,  // a field of `logging:`: the flag wins over the file (upstream's copyLogsFromFlags)
  Klog,     // klog's own flags, upstream before 1.26: no field, text format only
  Command,  // --help, --version: answered before anything is loaded
};

// Where --help lists a flag.
enum class FlagSection { Source, Config, Rules, NodeSettings, Servers, RunOnce, Logging, Klog, Ignored, Hidden };

struct FlagSpec {
  const char* name;
  FlagKind kind;
  FlagSection section;
  // How --help names the value ("string", "duration", "CIDR[,CIDR]"); "bool" for a switch, which
  // is true when given alone (--masquerade-all) and takes only --flag=value otherwise.
  const char* type;
  const char* defaultText;  // as --help shows it; "" for none
  const char* help;
  // Sets the flag's setting: a flag of a configuration field gets this (and `list`) from the field
  // table (fields.h); empty for the flags the precedence code reads itself.
  std::function<void(Loaded&, const std::string& value)> apply;
  bool list = false;  // given twice, the values add up (string slices, vmodule, feature gates)
};

const std::vector<FlagSpec>& flagTable();

// The flag spelled `name` (dashed; "v" for -v, "help" for -h), or nullptr.
const FlagSpec* findFlag(const std::string& name);

// The value a flag has when given without one: "true" for switches and --version, else nullptr
// (the value is the next argument).
const char* valueWhenBare(const FlagSpec& f);

}  // namespace kpn::config
