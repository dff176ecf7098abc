// Address and CIDR parsing. Everything downstream holds addresses in canonical text form
// (inet_ntop), so equal addresses are equal strings and nft lists them back the same way.
#pragma once

#include <optional>
#include <string>

namespace kpn::net {

enum class Family { V4, V6 };

struct Cidr {
  Family family;
  std::string address;  // canonical network address (host bits cleared)
  int prefixLen;
  std::string str() const { return address + "/" + std::to_string(prefixLen); }
};

// Canonical text of an IP literal, or nullopt. No zone ids, no CIDR suffix.
std::optional<std::string> canonicalIp(const std::string& text);
std::optional<Family> familyOf(const std::string& canonicalIp);
std::optional<Cidr> parseCidr(const std::string& text);

}  // namespace kpn::net
