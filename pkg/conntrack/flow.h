// One conntrack entry as the cleanups see it: the fields that decide whether it is stale
// (original destination, reply source and port, whether a reply was seen) and the ones that name
// it for deletion (the original tuple, its zone and its id). Addresses are binary, as netlink carries them, so a dump of 100k
// entries is matched without formatting one address as text.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

namespace kpn::conntrack {

// AF_INET (4 bytes used) or AF_INET6 (16).
struct Ip {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const Ip& o) const { return bytes == o.bytes; }
  bool operator!=(const Ip& o) const { return !(*this == o); }
  bool operator<(const Ip& o) const { return bytes < o.bytes; }
};

// Canonical or not, "10.96.0.10" / "fd00::a"; nullopt for anything else. *family gets AF_INET
// or AF_INET6.
std::optional<Ip> parseIp(const std::string& text, uint8_t* family);
std::string ipText(const Ip& ip, uint8_t family);

struct Flow {
  uint8_t family = 0;  // AF_INET, AF_INET6
  uint8_t proto = 0;   // IPPROTO_UDP, ...
  Ip origSrc, origDst, replySrc;
  uint16_t origSport = 0, origDport = 0, replySport = 0;  // host byte order
  bool replied = false;  // IPS_SEEN_REPLY: the other side answered at least once
  uint8_t state = 0;     // TCP or SCTP conntrack state (TCP_CONNTRACK_*, SCTP_CONNTRACK_*); 0 for others
  std::optional<uint16_t> zone;
  std::optional<uint32_t> id;  // the kernel's id: deleting by it never hits a newer entry with the same tuple
};

struct IpHash {
  size_t operator()(const Ip& ip) const {
    uint64_t a, b;
    std::memcpy(&a, ip.bytes.data(), 8);
    std::memcpy(&b, ip.bytes.data() + 8, 8);
    // splitmix64's finaliser: IPv4 addresses differ in a few middle bits only.
    uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ull);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return static_cast<size_t>(h ^ (h >> 31));
  }
};

// An address and a port: a frontend (ClusterIP:port) or an endpoint, as a hash key.
struct IpPort {
  Ip ip;
  uint16_t port;
  bool operator==(const IpPort& o) const { return port == o.port && ip == o.ip; }
};

struct IpPortHash {
  size_t operator()(const IpPort& k) const { return IpHash()(k.ip) ^ (size_t(k.port) * 0x9E3779B97F4A7C15ull); }
};

}  // namespace kpn::conntrack
