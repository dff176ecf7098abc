// Address and CIDR parsing. Everything downstream holds addresses in canonical text form
// (inet_ntop), so equal addresses are equal strings and nft lists them back the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kpn::net {

enum class Family { V4, V6 };

struct Cidr {
  Family family;
  std::string address;  // canonical network address (host bits cleared)
  int prefixLen;
  std::string str() const { return address + "/" + std::to_string(prefixLen); }
};

// Canonical text of an IP literal, or nullopt. No zone ids, no CIDR suffix. IPv4 octets with
// leading zeros are decimal, as upstream's ParseIPSloppy reads them ("10.96.0.031" = 10.96.0.31).
std::optional<std::string> canonicalIp(const std::string& text);
std::optional<Family> familyOf(const std::string& canonicalIp);
// The address part is read like canonicalIp (ParseCIDRSloppy: "010.0.0.0/8" = 10.0.0.0/8).
std::optional<Cidr> parseCidr(const std::string& text);
// Whether `canonicalIp` lies inside `cidr` (false across families).
bool contains(const Cidr& cidr, const std::string& canonicalIp);
// 127.0.0.0/8 and ::1: never NodePort addresses.
bool isLoopback(const std::string& canonicalIp);

// The addresses configured on this host (this network namespace), and the interfaces that hold
// the default routes: what --nodeport-addresses selects from.
struct HostAddress {
  std::string interface;
  std::string ip;  // canonical
  Family family;
  bool operator==(const HostAddress& o) const { return interface == o.interface && ip == o.ip && family == o.family; }
};
struct HostAddresses {
  std::vector<HostAddress> addresses;     // in interface order; link-local IPv6 left out
  std::string defaultRouteInterface[2];   // by Family (V4, V6); "" when there is no default route
  bool operator==(const HostAddresses& o) const {
    return addresses == o.addresses && defaultRouteInterface[0] == o.defaultRouteInterface[0] &&
           defaultRouteInterface[1] == o.defaultRouteInterface[1];
  }
  bool operator!=(const HostAddresses& o) const { return !(*this == o); }
};
// getifaddrs plus /proc/net/route and /proc/net/ipv6_route; cheap enough to call every sync.
HostAddresses readHostAddresses();

}  // namespace kpn::net
