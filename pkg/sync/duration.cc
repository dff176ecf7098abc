#include "pkg/sync/duration.h"

#include <cctype>
#include <cstdlib>

namespace kpn::sync {

std::optional<std::chrono::nanoseconds> parseGoDuration(const std::string& text) {
  std::string s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.erase(0, 1);
  }
  if (s == "0") return std::chrono::nanoseconds(0);
  if (s.empty()) return std::nullopt;
  static const std::pair<const char*, double> kUnits[] = {{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"μs", 1e3},
                                                          {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
  double total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    double value = std::strtod(s.substr(start, i - start).c_str(), nullptr);
    size_t unitStart = i;
    while (i < s.size() && !std::isdigit(static_cast<unsigned char>(s[i])) && s[i] != '.') ++i;
    std::string unit = s.substr(unitStart, i - unitStart);
    bool known = false;
    for (const auto& [name, scale] : kUnits)
      if (unit == name) {
        total += value * scale;
        known = true;
      }
    if (!known) return std::nullopt;
  }
  if (negative) return std::nullopt;  // a negative sync period makes no sense
  return std::chrono::nanoseconds(static_cast<int64_t>(total));
}

}  // namespace kpn::sync
