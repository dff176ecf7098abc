// What the renderer needs to know about this node and its flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pkg/net/ip.h"

namespace kpn::render {

struct NodeConfig {
  std::string nodeName;                    // endpoints with this nodeName are local
  std::optional<net::Cidr> clusterCidrV4;  // traffic from outside it to a ClusterIP is masqueraded
  std::optional<net::Cidr> clusterCidrV6;
  bool masqueradeAll = false;
  uint32_t masqueradeMark = 0x4000;        // upstream's default bit 14; not a public API
  int backendShards = 128;                 // backends maps per protocol and family
  std::string serviceProxyName;            // handle services with this proxy-name label ("" = none)
};

// "--cluster-cidr" value: at most one CIDR per family, comma separated. Returns an error text.
std::optional<std::string> parseClusterCidrs(const std::string& flag, NodeConfig& cfg);

}  // namespace kpn::render
