#include "pkg/http/bind_address.h"

#include <arpa/inet.h>

#include <cctype>

namespace kpn::http {

std::optional<BindAddress> parseBindAddress(const std::string& text, std::string* error) {
  auto bad = [&](const std::string& why) -> std::optional<BindAddress> {
    *error = "\"" + text + "\": " + why;
    return std::nullopt;
  };
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return bad("want host:port, e.g. 0.0.0.0:10256 or [::]:10256");
  std::string host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad("an IPv6 address needs brackets: [::1]:10249");
  }
  if (port.empty() || port.size() > 5) return bad("the port must be a number 0..65535");
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad("the port must be a number 0..65535");
  int p = std::stoi(port);
  if (p > 65535) return bad("the port must be a number 0..65535");
  unsigned char buf[16];
  if (!host.empty() && inet_pton(AF_INET, host.c_str(), buf) != 1 && inet_pton(AF_INET6, host.c_str(), buf) != 1)
    return bad("\"" + host + "\" is not an IP address");
  if (host == "0.0.0.0" || host == "::") host.clear();
  return BindAddress{host, p};
}

}  // namespace kpn::http
