#include "nft/kernel/malloc_tunables.h"

#include <cstdlib>

extern char** environ;

namespace kpn::nft {

namespace {

constexpr std::string_view kTunablesName = "GLIBC_TUNABLES";

// Whether `tunables` ("name=value" entries separated by ':') gives a value for the tunable of
// `entry` (also "name=value"): a whole name, not a suffix of another.
bool namesTunableOf(std::string_view tunables, std::string_view entry) {
  const std::string_view name = entry.substr(0, entry.find('=') + 1);  // "glibc.malloc.hugetlb="
  for (size_t at = 0; at <= tunables.size();) {
    size_t end = tunables.find(':', at);
    if (end == std::string_view::npos) end = tunables.size();
    if (tunables.compare(at, name.size(), name) == 0 && end - at >= name.size()) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::string withMallocTunables(std::optional<std::string_view> current) {
  std::string out(current.value_or(""));
  const std::string given = out;
  for (std::string_view tunable : kMallocTunables) {
    if (namesTunableOf(given, tunable)) continue;
    if (!out.empty()) out += ':';
    out += tunable;
  }
  return out;
}

std::vector<std::string> environmentWithMallocTunables(std::vector<std::string> env) {
  const std::string prefix = std::string(kTunablesName) + "=";
  for (auto& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) != 0) continue;
    entry = prefix + withMallocTunables(std::string_view(entry).substr(prefix.size()));
    return env;
  }
  env.push_back(prefix + withMallocTunables(std::nullopt));
  return env;
}

void setMallocTunablesForChildren() {
  const std::string name(kTunablesName);
  const char* current = ::getenv(name.c_str());
  ::setenv(name.c_str(), withMallocTunables(current ? std::optional<std::string_view>(current) : std::nullopt).c_str(),
           1);
}

std::vector<std::string> currentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace kpn::nft
