// Integer files under /proc/sys, /sys and /proc/self: read, and written only when different.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kpn::node {

// The integer in `path`, or nullopt (absent, unreadable, not a number).
std::optional<int64_t> readIntFile(const std::string& path);

// Writes `value` (plus a newline); returns the error text ("Read-only file system") on failure.
std::optional<std::string> writeIntFile(const std::string& path, int64_t value);

}  // namespace kpn::node
