// Reading one flag's text as the value its field wants (upstream's pflag types: bool, int32,
// float32, duration, string slices, NAME=bool maps, vmodule lists, quantities). A value that does
// not parse throws FlagError naming the flag and the value: the command line exits 2 with it,
// nothing is replaced by a default.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

struct FlagError {
  std::string text;
};

// "invalid value \"V\" for --FLAG: WANT"
[[noreturn]] void badFlagValue(const std::string& flag, const std::string& value, const std::string& want);

// strconv.ParseBool's words: 1 t T TRUE true True, 0 f F FALSE false False.
bool flagBool(const std::string& flag, const std::string& v);
int32_t flagInt32(const std::string& flag, const std::string& v);
uint32_t flagUint32(const std::string& flag, const std::string& v);
float flagFloat(const std::string& flag, const std::string& v);
Duration flagDuration(const std::string& flag, const std::string& v);
// Comma-separated items, empty ones dropped ("" is no item).
std::vector<std::string> splitComma(const std::string& v);
// NAME=true|false,...
std::map<std::string, bool> flagGates(const std::string& flag, const std::string& v);
// PATTERN=N,... (klog's --vmodule): a pattern must not be empty (validate.cc checks the rest).
std::vector<VModule> flagVModule(const std::string& flag, const std::string& v);
// "primary" or CIDRs, every entry checked: one bad entry is an error naming it, never skipped.
std::vector<std::string> flagNodePortAddresses(const std::string& flag, const std::string& v);
// A resource quantity as upstream's --log-*-info-buffer-size takes it ("0", "512", "64Ki", "1M").
std::string flagQuantity(const std::string& flag, const std::string& v);
// klog's severity threshold: INFO, WARNING, ERROR, FATAL or 0..3.
int32_t flagSeverity(const std::string& flag, const std::string& v);

// The grammar of a Kubernetes resource quantity (apimachinery's resource.ParseQuantity).
bool isQuantity(const std::string& v);

}  // namespace kpn::config
