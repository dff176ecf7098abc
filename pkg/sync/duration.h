// Go-syntax durations ("0", "250ms", "1m30s", "1.5h"), as upstream's flags take them.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kpn::sync {

std::optional<std::chrono::nanoseconds> parseGoDuration(const std::string& text);

}  // namespace kpn::sync
