// Go-syntax durations ("0", "250ms", "1m30s", "1.5h"), as upstream's flags take them.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kpn::config {

std::optional<std::chrono::nanoseconds> parseGoDuration(const std::string& text);

// Go's time.Duration.String(): "0s", "250ms", "1.5s", "1h0m0s", "-30s"; parseGoDuration reads it
// back (the sign aside).
std::string formatGoDuration(std::chrono::nanoseconds d);

}  // namespace kpn::config
