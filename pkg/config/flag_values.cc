#include "pkg/config/flag_values.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "pkg/config/duration.h"
#include "pkg/net/ip.h"
#include "pkg/services/node_config.h"

namespace kpn::config {

void badFlagValue(const std::string& flag, const std::string& value, const std::string& want) {
  throw FlagError{"invalid value \"" + value + "\" for --" + flag + ": " + want};
}

bool flagBool(const std::string& flag, const std::string& v) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"})
    if (v == t) return true;
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"})
    if (v == f) return false;
  badFlagValue(flag, v, "want true or false");
}

namespace {

long long flagInteger(const std::string& flag, const std::string& v, long long min, long long max, const char* want) {
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno == ERANGE || n < min || n > max) badFlagValue(flag, v, want);
  return n;
}

}  // namespace

int32_t flagInt32(const std::string& flag, const std::string& v) {
  return static_cast<int32_t>(flagInteger(flag, v, INT32_MIN, INT32_MAX, "want a 32-bit integer"));
}

uint32_t flagUint32(const std::string& flag, const std::string& v) {
  return static_cast<uint32_t>(flagInteger(flag, v, 0, UINT32_MAX, "want a non-negative 32-bit integer"));
}

float flagFloat(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  float f = std::strtof(v.c_str(), &end);
  if (v.empty() || *end) badFlagValue(flag, v, "want a number");
  return f;
}

Duration flagDuration(const std::string& flag, const std::string& v) {
  auto d = parseGoDuration(v);
  if (!d) badFlagValue(flag, v, "want a Go duration (0s, 250ms, 1m)");
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

std::map<std::string, bool> flagGates(const std::string& flag, const std::string& v) {
  std::map<std::string, bool> gates;
  for (const std::string& kv : splitComma(v)) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) badFlagValue(flag, v, "want NAME=true|false,...");
    gates[kv.substr(0, eq)] = flagBool(flag, kv.substr(eq + 1));
  }
  return gates;
}

std::vector<VModule> flagVModule(const std::string& flag, const std::string& v) {
  std::vector<VModule> out;
  for (const std::string& kv : splitComma(v)) {
    size_t eq = kv.rfind('=');
    if (eq == std::string::npos || eq == 0) badFlagValue(flag, v, "want PATTERN=N,...");
    out.push_back({kv.substr(0, eq), flagInt32(flag, kv.substr(eq + 1))});
  }
  return out;
}

std::vector<std::string> flagNodePortAddresses(const std::string& flag, const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  std::string item;
  // Every entry counts, an empty one too ("10.0.0.0/8,,"): as upstream's string slice, whose
  // validation refuses what is not a CIDR or a keyword. Only a wholly empty value is the empty list.
  while (!v.empty() && std::getline(ss, item, ',')) {
    if (!services::isNodePortAddressEntry(item)) badFlagValue(flag, item, services::kNodePortAddressEntryRule);
    out.push_back(item);
  }
  if (!v.empty() && v.back() == ',') badFlagValue(flag, "", services::kNodePortAddressEntryRule);
  return out;
}

bool isQuantity(const std::string& v) {
  // sign, number, then a binary (Ki..Ei), decimal (n u m k M G T P E) or exponent suffix.
  static const std::regex grammar(R"(^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$)");
  return std::regex_match(v, grammar);
}

std::string flagQuantity(const std::string& flag, const std::string& v) {
  if (!isQuantity(v)) badFlagValue(flag, v, "want a quantity (0, 512, 64Ki, 1M)");
  return v;
}

int32_t flagSeverity(const std::string& flag, const std::string& v) {
  const char* const names[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  std::string upper;
  for (char c : v) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int32_t i = 0; i < 4; ++i)
    if (upper == names[i] || v == std::to_string(i)) return i;
  badFlagValue(flag, v, "want INFO, WARNING, ERROR, FATAL or 0..3");
}

}  // namespace kpn::config
