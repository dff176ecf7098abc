#include "pkg/config/duration.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>

namespace kpn::config {

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

namespace {

// `v / unit` in decimal with the fraction's trailing zeros dropped: (1500, 1000) -> "1.5".
std::string fixed(uint64_t v, uint64_t unit) {
  std::string out = std::to_string(v / unit);
  uint64_t rest = v % unit;
  if (rest == 0) return out;
  std::string frac;
  for (uint64_t scale = unit / 10; scale > 0; scale /= 10) {
    frac += static_cast<char>('0' + rest / scale);
    rest %= scale;
  }
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return out + "." + frac;
}

}  // namespace

std::string formatGoDuration(std::chrono::nanoseconds d) {
  int64_t ns = d.count();
  if (ns == 0) return "0s";
  std::string sign = ns < 0 ? "-" : "";
  uint64_t u = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  if (u < 1000) return sign + std::to_string(u) + "ns";
  if (u < 1000000) return sign + fixed(u, 1000) + "\u00b5s";
  if (u < 1000000000) return sign + fixed(u, 1000000) + "ms";
  const uint64_t hour = 3600000000000ULL, minute = 60000000000ULL;
  std::string out = sign;
  if (u >= hour) out += std::to_string(u / hour) + "h";
  if (u >= minute) out += std::to_string(u % hour / minute) + "m";
  return out + fixed(u % minute, 1000000000) + "s";
}

}  // namespace kpn::config
