#include "pkg/node/oom_score.h"

#include "pkg/node/sysctl_file.h"

namespace kpn::node {

std::optional<std::string> setOomScoreAdj(int value, const std::string& path) {
  if (readIntFile(path) == value) return std::nullopt;
  if (auto err = writeIntFile(path, value))
    return "oomScoreAdj: cannot write " + std::to_string(value) + " to " + path + " (" + *err + "); keeping the current value";
  return std::nullopt;
}

}  // namespace kpn::node
