#include "pkg/trace/node_view.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bitset>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kpn::trace {

namespace {

int prefixLen(const std::string& cidr) {
  auto slash = cidr.find('/');
  return slash == std::string::npos ? -1 : std::atoi(cidr.c_str() + slash + 1);
}

std::string v6FromHex(const std::string& hex) {
  if (hex.size() != 32) return "";
  in6_addr a{};
  for (int i = 0; i < 16; ++i) a.s6_addr[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, &a, buf, sizeof buf) ? buf : "";
}

}  // namespace

std::vector<nft::eval::Route> readRoutes() {
  std::vector<nft::eval::Route> out;
  std::string line;
  std::ifstream v4("/proc/net/route");
  std::getline(v4, line);  // header
  while (std::getline(v4, line)) {
    std::istringstream ss(line);
    std::string iface, dest, gw, flags, refcnt, use, metric, mask;
    if (!(ss >> iface >> dest >> gw >> flags >> refcnt >> use >> metric >> mask)) continue;
    in_addr d{};
    d.s_addr = static_cast<uint32_t>(std::stoul(dest, nullptr, 16));  // the kernel prints the raw word
    uint32_t m = static_cast<uint32_t>(std::stoul(mask, nullptr, 16));
    char buf[INET_ADDRSTRLEN];
    out.push_back({std::string(inet_ntop(AF_INET, &d, buf, sizeof buf)) + "/" + std::to_string(std::bitset<32>(m).count()), iface});
  }
  std::ifstream v6("/proc/net/ipv6_route");
  while (std::getline(v6, line)) {
    std::istringstream ss(line);
    std::string dest, len, src, srcLen, hop, metric, ref, use, flags, iface;
    if (!(ss >> dest >> len >> src >> srcLen >> hop >> metric >> ref >> use >> flags >> iface)) continue;
    std::string addr = v6FromHex(dest);
    if (addr.empty() || iface == "lo") continue;  // local and unreachable entries
    out.push_back({addr + "/" + std::to_string(std::stoul(len, nullptr, 16)), iface});
  }
  return out;
}

std::string routeInterface(const std::vector<nft::eval::Route>& routes, const std::string& ip) {
  const nft::eval::Route* best = nullptr;
  for (const auto& r : routes) {
    auto c = net::parseCidr(r.cidr);
    if (c && net::contains(*c, ip) && (!best || prefixLen(r.cidr) > prefixLen(best->cidr))) best = &r;
  }
  return best ? best->ifname : "";
}

std::optional<std::string> sourceAddressToward(const std::string& ip) {
  bool v6 = ip.find(':') != std::string::npos;
  sockaddr_storage to{};
  socklen_t len = 0;
  if (v6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&to);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(9);
    if (inet_pton(AF_INET6, ip.c_str(), &s->sin6_addr) != 1) return std::nullopt;
    len = sizeof *s;
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&to);
    s->sin_family = AF_INET;
    s->sin_port = htons(9);
    if (inet_pton(AF_INET, ip.c_str(), &s->sin_addr) != 1) return std::nullopt;
    len = sizeof *s;
  }
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  sockaddr_storage me{};
  socklen_t meLen = sizeof me;
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), len) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&me), &meLen) == 0) {
    char buf[INET6_ADDRSTRLEN];
    const void* a = v6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&me)->sin6_addr)
                       : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&me)->sin_addr);
    if (inet_ntop(v6 ? AF_INET6 : AF_INET, a, buf, sizeof buf)) out = buf;
  }
  close(fd);
  return out;
}

nft::eval::Environment environmentFor(const net::HostAddresses& host, const std::vector<nft::eval::Route>& routes,
                                      const nft::eval::Packet& p, const SourceChooser& choose) {
  nft::eval::Environment env;
  for (const auto& a : host.addresses) env.localAddresses.push_back(a.ip);
  env.routes = routes;
  int f = p.family == nft::Family::IPv4 ? 0 : 1;
  env.defaultInterface = host.defaultRouteInterface[f].empty() ? "eth0" : host.defaultRouteInterface[f];
  // A placeholder until the candidate is known; refineMasquerade puts in the address chosen
  // toward each endpoint. The family's first address when there is no route at all.
  if (auto src = choose(p.daddr)) {
    env.masqueradeSource[f] = *src;
  } else {
    for (const auto& a : host.addresses)
      if ((a.family == net::Family::V4) == (f == 0) && !net::isLoopback(a.ip) && env.masqueradeSource[f].empty())
        env.masqueradeSource[f] = a.ip;
  }
  return env;
}

void refineMasquerade(nft::eval::Trace& t, const SourceChooser& choose) {
  for (auto& c : t.candidates)
    if (c.masquerade)
      if (auto src = choose(c.address)) {
        const std::string before = "masquerade to " + c.sourceSeen;
        for (auto& s : c.path)
          if (s.action.find(before) != std::string::npos) s.action.replace(s.action.find(before), before.size(), "masquerade to " + *src);
        c.sourceSeen = *src;
      }
}

}  // namespace kpn::trace
