#include "nft/kernel/huge_page_malloc.h"

#include <cstdlib>

extern char** environ;

namespace kpn::nft {

namespace {

constexpr std::string_view kTunablesName = "GLIBC_TUNABLES";

bool namesHugetlb(std::string_view tunables) {
  // Entries are "name=value" separated by ':'; match a whole name, not a suffix of another.
  constexpr std::string_view name = "glibc.malloc.hugetlb=";
  for (size_t at = 0; at <= tunables.size();) {
    size_t end = tunables.find(':', at);
    if (end == std::string_view::npos) end = tunables.size();
    if (tunables.compare(at, name.size(), name) == 0 && end - at >= name.size()) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::string tunablesWithHugePageMalloc(std::optional<std::string_view> current) {
  if (!current || current->empty()) return kHugePageMallocTunable;
  if (namesHugetlb(*current)) return std::string(*current);
  return std::string(*current) + ":" + kHugePageMallocTunable;
}

std::vector<std::string> withHugePageMalloc(std::vector<std::string> env) {
  const std::string prefix = std::string(kTunablesName) + "=";
  for (auto& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) != 0) continue;
    entry = prefix + tunablesWithHugePageMalloc(std::string_view(entry).substr(prefix.size()));
    return env;
  }
  env.push_back(prefix + tunablesWithHugePageMalloc(std::nullopt));
  return env;
}

void setHugePageMallocForChildren() {
  const std::string name(kTunablesName);
  const char* current = ::getenv(name.c_str());
  ::setenv(name.c_str(),
           tunablesWithHugePageMalloc(current ? std::optional<std::string_view>(current) : std::nullopt).c_str(), 1);
}

std::vector<std::string> currentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace kpn::nft
