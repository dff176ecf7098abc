#include "nft/kernel/huge_page_malloc.h"

extern char** environ;

namespace kpn::nft {

namespace {

constexpr const char* kTunablesPrefix = "GLIBC_TUNABLES=";

bool namesHugetlb(const std::string& tunables) {
  // Entries are "name=value" separated by ':'; match a whole name, not a suffix of another.
  const std::string name = "glibc.malloc.hugetlb=";
  for (size_t at = 0; at <= tunables.size();) {
    size_t end = tunables.find(':', at);
    if (end == std::string::npos) end = tunables.size();
    if (tunables.compare(at, name.size(), name) == 0 && end - at >= name.size()) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::vector<std::string> withHugePageMalloc(std::vector<std::string> env) {
  const std::string prefix = kTunablesPrefix;
  for (auto& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) != 0) continue;
    std::string tunables = entry.substr(prefix.size());
    if (!namesHugetlb(tunables)) entry += (tunables.empty() ? "" : ":") + std::string(kHugePageMallocTunable);
    return env;
  }
  env.push_back(prefix + kHugePageMallocTunable);
  return env;
}

std::vector<std::string> currentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace kpn::nft
