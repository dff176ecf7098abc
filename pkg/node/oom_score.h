// oomScoreAdj: the kernel's OOM-killer bias of this process (upstream's default -999: killed
// last). Failure (no privilege to lower it) is a warning.
#pragma once

#include <optional>
#include <string>

namespace kpn::node {

// Returns a warning line when the value could not be written.
std::optional<std::string> setOomScoreAdj(int value, const std::string& path = "/proc/self/oom_score_adj");

}  // namespace kpn::node
