#include "pkg/conntrack/flow.h"

#include <arpa/inet.h>
#include <sys/socket.h>

namespace kpn::conntrack {

std::optional<Ip> parseIp(const std::string& text, uint8_t* family) {
  Ip ip;
  if (inet_pton(AF_INET, text.c_str(), ip.bytes.data()) == 1) {
    *family = AF_INET;
    return ip;
  }
  if (inet_pton(AF_INET6, text.c_str(), ip.bytes.data()) == 1) {
    *family = AF_INET6;
    return ip;
  }
  return std::nullopt;
}

std::string ipText(const Ip& ip, uint8_t family) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, ip.bytes.data(), buf, sizeof buf);
  return buf;
}

}  // namespace kpn::conntrack
