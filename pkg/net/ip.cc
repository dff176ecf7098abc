#include "pkg/net/ip.h"

#include <arpa/inet.h>

#include <cstring>

namespace kpn::net {

std::optional<std::string> canonicalIp(const std::string& text) {
  unsigned char buf[16];
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) return std::string(inet_ntop(AF_INET, buf, out, sizeof out));
  if (inet_pton(AF_INET6, text.c_str(), buf) == 1) return std::string(inet_ntop(AF_INET6, buf, out, sizeof out));
  return std::nullopt;
}

std::optional<Family> familyOf(const std::string& ip) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, ip.c_str(), buf) == 1) return Family::V4;
  if (inet_pton(AF_INET6, ip.c_str(), buf) == 1) return Family::V6;
  return std::nullopt;
}

std::optional<Cidr> parseCidr(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos || slash + 1 >= text.size()) return std::nullopt;
  std::string addr = text.substr(0, slash), len = text.substr(slash + 1);
  if (len.find_first_not_of("0123456789") != std::string::npos || len.size() > 3) return std::nullopt;
  int prefix = std::stoi(len);
  unsigned char buf[16];
  int af;
  int bytes;
  Family fam;
  if (inet_pton(AF_INET, addr.c_str(), buf) == 1) {
    af = AF_INET, bytes = 4, fam = Family::V4;
  } else if (inet_pton(AF_INET6, addr.c_str(), buf) == 1) {
    af = AF_INET6, bytes = 16, fam = Family::V6;
  } else {
    return std::nullopt;
  }
  if (prefix > bytes * 8) return std::nullopt;
  for (int bit = prefix; bit < bytes * 8; ++bit) buf[bit / 8] &= static_cast<unsigned char>(~(0x80 >> (bit % 8)));
  char out[INET6_ADDRSTRLEN];
  return Cidr{fam, inet_ntop(af, buf, out, sizeof out), prefix};
}

}  // namespace kpn::net
