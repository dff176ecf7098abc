#include "pkg/net/ip.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace kpn::net {

namespace {

// Dotted-quad IPv4 with each octet read as decimal, leading zeros allowed ("010.096.0.031" is
// 10.96.0.31): upstream's netutils.ParseIPSloppy, which reads the objects the API server accepted
// before Kubernetes 1.20 tightened validation. inet_pton refuses them; inet_aton would read them
// as octal.
bool parseIPv4Sloppy(const std::string& text, unsigned char out[4]) {
  size_t pos = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (pos >= text.size() || text[pos] != '.') return false;
      ++pos;
    }
    size_t start = pos;
    unsigned value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      value = value * 10 + static_cast<unsigned>(text[pos] - '0');
      if (value > 255) return false;
      ++pos;
    }
    if (pos == start) return false;
    out[part] = static_cast<unsigned char>(value);
  }
  return pos == text.size();
}

}  // namespace

std::optional<std::string> canonicalIp(const std::string& text) {
  unsigned char buf[16];
  char out[INET6_ADDRSTRLEN];
  if (parseIPv4Sloppy(text, buf)) return std::string(inet_ntop(AF_INET, buf, out, sizeof out));
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
  if (parseIPv4Sloppy(addr, buf)) {
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

bool contains(const Cidr& cidr, const std::string& ip) {
  unsigned char net[16], addr[16];
  int af = cidr.family == Family::V4 ? AF_INET : AF_INET6;
  if (inet_pton(af, cidr.address.c_str(), net) != 1 || inet_pton(af, ip.c_str(), addr) != 1) return false;
  for (int bit = 0; bit < cidr.prefixLen; ++bit) {
    unsigned char m = static_cast<unsigned char>(0x80 >> (bit % 8));
    if ((net[bit / 8] & m) != (addr[bit / 8] & m)) return false;
  }
  return true;
}

bool isLoopback(const std::string& ip) {
  static const Cidr v4{Family::V4, "127.0.0.0", 8};
  return ip == "::1" || contains(v4, ip);
}

namespace {

// The interface of the first default route in /proc/net/route (IPv4) or /proc/net/ipv6_route.
std::string defaultRouteInterface(Family f) {
  std::ifstream in(f == Family::V4 ? "/proc/net/route" : "/proc/net/ipv6_route");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    if (f == Family::V4) {
      // Iface Destination Gateway Flags ... Mask
      std::string iface, dest, gw, flags, refcnt, use, metric, mask;
      if (!(ss >> iface >> dest >> gw >> flags >> refcnt >> use >> metric >> mask)) continue;
      if (dest == "00000000" && mask == "00000000") return iface;
    } else {
      // dest dest_len src src_len nexthop metric refcnt use flags iface
      std::string dest, len, src, srcLen, hop, metric, ref, use, flags, iface;
      if (!(ss >> dest >> len >> src >> srcLen >> hop >> metric >> ref >> use >> flags >> iface)) continue;
      if (dest == std::string(32, '0') && len == "00" && iface != "lo") return iface;
    }
  }
  return "";
}

}  // namespace

HostAddresses readHostAddresses() {
  HostAddresses out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
      char buf[INET6_ADDRSTRLEN];
      if (a->ifa_addr->sa_family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
        out.addresses.push_back({a->ifa_name, inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf), Family::V4});
      } else if (a->ifa_addr->sa_family == AF_INET6) {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr)) continue;  // fe80::/10 is not a NodePort address
        out.addresses.push_back({a->ifa_name, inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof buf), Family::V6});
      }
    }
    freeifaddrs(list);
  }
  out.defaultRouteInterface[0] = defaultRouteInterface(Family::V4);
  out.defaultRouteInterface[1] = defaultRouteInterface(Family::V6);
  return out;
}

}  // namespace kpn::net
