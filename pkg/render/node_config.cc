#include "pkg/render/node_config.h"

#include <sstream>

namespace kpn::render {

namespace {

std::vector<std::string> splitComma(const std::string& flag) {
  std::vector<std::string> out;
  std::stringstream ss(flag);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

// Interface names end up in rules: keep them to what the kernel allows (IFNAMSIZ, no blanks).
bool validInterfaceName(const std::string& s) {
  if (s.empty() || s.size() > 15) return false;
  for (unsigned char c : s)
    if (c <= 0x20 || c >= 0x7f || c == '/' || c == '"' || c == '\\' || c == '*') return false;
  return true;
}

}  // namespace

std::optional<std::string> parseClusterCidrs(const std::string& flag, NodeConfig& cfg) {
  for (const std::string& item : splitComma(flag)) {
    auto cidr = net::parseCidr(item);
    if (!cidr) return "invalid CIDR \"" + item + "\" in --cluster-cidr";
    auto& slot = cidr->family == net::Family::V4 ? cfg.clusterCidrV4 : cfg.clusterCidrV6;
    if (slot) return "--cluster-cidr has more than one CIDR of the same family";
    slot = *cidr;
  }
  return std::nullopt;
}

std::vector<std::string> parseNodePortAddresses(const std::string& flag, NodeConfig& cfg) {
  std::vector<std::string> warnings;
  cfg.nodePortPrimary = true;
  cfg.nodePortCidrs.clear();
  bool primary = false;
  for (const std::string& item : splitComma(flag)) {
    if (item == "primary") {
      primary = true;
      continue;
    }
    auto cidr = net::parseCidr(item);
    if (!cidr) {
      warnings.push_back("--nodeport-addresses: \"" + item + "\" is not a CIDR; skipped");
      continue;
    }
    cfg.nodePortCidrs.push_back(*cidr);
  }
  if (primary && !cfg.nodePortCidrs.empty()) {
    warnings.push_back("--nodeport-addresses: \"primary\" cannot be combined with CIDRs; using primary");
    cfg.nodePortCidrs.clear();
  }
  if (!primary && cfg.nodePortCidrs.empty() && !splitComma(flag).empty())
    warnings.push_back("--nodeport-addresses: no valid CIDR left; using primary");
  cfg.nodePortPrimary = cfg.nodePortCidrs.empty();
  return warnings;
}

std::optional<std::string> parseDetectLocal(const std::string& mode, const std::string& bridge,
                                            const std::string& prefix, NodeConfig& cfg) {
  if (mode.empty() || mode == "ClusterCIDR") {
    cfg.detectLocal = LocalDetectMode::ClusterCIDR;
  } else if (mode == "NodeCIDR") {
    cfg.detectLocal = LocalDetectMode::NodeCIDR;
  } else if (mode == "BridgeInterface") {
    if (!validInterfaceName(bridge))
      return "--detect-local-mode=BridgeInterface needs --pod-bridge-interface=NAME (an interface name)";
    cfg.detectLocal = LocalDetectMode::BridgeInterface;
    cfg.podBridgeInterface = bridge;
  } else if (mode == "InterfaceNamePrefix") {
    if (!validInterfaceName(prefix))
      return "--detect-local-mode=InterfaceNamePrefix needs --pod-interface-name-prefix=PREFIX (an interface name prefix)";
    cfg.detectLocal = LocalDetectMode::InterfaceNamePrefix;
    cfg.podInterfaceNamePrefix = prefix;
  } else {
    return "--detect-local-mode=\"" + mode + "\" is not ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix";
  }
  return std::nullopt;
}

}  // namespace kpn::render
