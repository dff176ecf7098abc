#include "pkg/services/node_config.h"

#include <sstream>

namespace kpn::services {

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

bool isNodePortAddressEntry(const std::string& entry) {
  return entry == "primary" || entry == "localhost" || entry == "all" || net::parseCidr(entry).has_value();
}

void applyNodePortAddresses(const std::vector<std::string>& entries, NodeConfig& cfg) {
  cfg.nodePortCidrs.clear();
  bool primary = entries.empty();
  auto add = [&](const char* text) { cfg.nodePortCidrs.push_back(*net::parseCidr(text)); };
  for (const std::string& e : entries) {
    if (e == "primary") {
      primary = true;
    } else if (e == "localhost") {
      add("127.0.0.0/8"), add("::1/128");
    } else if (e == "all") {
      add("0.0.0.0/0"), add("::/0");
    } else if (auto cidr = net::parseCidr(e)) {
      cfg.nodePortCidrs.push_back(*cidr);
    }
  }
  cfg.nodePortPrimary = primary || cfg.nodePortCidrs.empty();
  cfg.localhostNodePortsV4 = cfg.localhostNodePortsV6 = false;
  for (const net::Cidr& c : cfg.nodePortCidrs) {
    if (c.prefixLen == 0) continue;  // `all` reaches loopback by accident, not by choice
    if (c.family == net::Family::V4 && net::contains(c, "127.0.0.1")) cfg.localhostNodePortsV4 = true;
    if (c.family == net::Family::V6 && net::contains(c, "::1")) cfg.localhostNodePortsV6 = true;
  }
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

}  // namespace kpn::services
