#include "pkg/render/node_config.h"

#include <sstream>

namespace kpn::render {

std::optional<std::string> parseClusterCidrs(const std::string& flag, NodeConfig& cfg) {
  std::stringstream ss(flag);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto cidr = net::parseCidr(item);
    if (!cidr) return "invalid CIDR \"" + item + "\" in --cluster-cidr";
    auto& slot = cidr->family == net::Family::V4 ? cfg.clusterCidrV4 : cfg.clusterCidrV6;
    if (slot) return "--cluster-cidr has more than one CIDR of the same family";
    slot = *cidr;
  }
  return std::nullopt;
}

}  // namespace kpn::render
