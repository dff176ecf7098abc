#include "pkg/api/validate.h"

#include <cstdio>

namespace kpn::api {
namespace {

bool isLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

bool isDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!isLowerAlnum(s.front()) || !isLowerAlnum(s.back())) return false;
  for (char c : s)
    if (!isLowerAlnum(c) && c != '-') return false;
  return true;
}

bool isDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    // Labels inside a subdomain follow the label rule except for the 63-character cap, which
    // Kubernetes does not apply to subdomain parts; the 253 total still holds.
    if (label.empty() || !isLowerAlnum(label.front()) || !isLowerAlnum(label.back())) return false;
    for (char c : label)
      if (!isLowerAlnum(c) && c != '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool isIanaServiceName(std::string_view s) {
  if (s.empty() || s.size() > 15 || s.front() == '-' || s.back() == '-') return false;
  bool letter = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'a' && c <= 'z') letter = true;
    else if (c == '-') {
      if (s[i - 1] == '-') return false;
    } else if (!(c >= '0' && c <= '9')) {
      return false;
    }
  }
  return letter;
}

std::optional<Protocol> parseProtocol(std::string_view s) {
  if (s == "TCP") return Protocol::TCP;
  if (s == "UDP") return Protocol::UDP;
  if (s == "SCTP") return Protocol::SCTP;
  return std::nullopt;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace kpn::api
