#include "pkg/config/node_config.h"

#include <algorithm>
#include <cctype>

#include "pkg/config/warnings.h"

namespace kpn::config {

std::string nodeName(const ProxyConfig& c, const std::string& hostname) {
  // upstream's GetHostname: the override trimmed, else the hostname; lowercased either way.
  std::string s = c.hostnameOverride.empty() ? hostname : c.hostnameOverride;
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

std::optional<std::string> toNodeConfig(const ProxyConfig& c, services::NodeConfig& out, std::vector<std::string>* warnings) {
  out.masqueradeAll = c.nftables.masqueradeAll;
  out.masqueradeMark = 1u << c.nftables.masqueradeBit;
  out.clusterCidrV4.reset();
  out.clusterCidrV6.reset();
  if (auto err = services::parseClusterCidrs(c.clusterCIDR, out)) return "clusterCIDR: " + *err;
  for (const std::string& a : c.nodePortAddresses)
    if (!services::isNodePortAddressEntry(a)) return "nodePortAddresses: \"" + a + "\": " + services::kNodePortAddressEntryRule;
  services::applyNodePortAddresses(c.nodePortAddresses, out);
  auto gate = c.featureGates.find(kLocalhostNodePortsGate);  // upstream's gate, set false: off
  if (gate != c.featureGates.end() && !gate->second) out.localhostNodePortsV4 = out.localhostNodePortsV6 = false;
  const services::SchedulerChoice sched = services::parseScheduler(c.ipvs.scheduler);
  out.scheduler = sched.scheduler;
  if (warnings && !sched.known)
    warnings->push_back("scheduler \"" + c.ipvs.scheduler +
                        "\" is not one we know (random, round-robin, source-hash, least-connection, or IPVS's rr, wrr, sh, mh, lc, wlc, ...): random");
  if (warnings && !sched.warning.empty()) warnings->push_back(sched.warning);
  if (auto err = services::parseDetectLocal(c.detectLocalMode, c.detectLocal.bridgeInterface,
                                          c.detectLocal.interfaceNamePrefix, out))
    return "detectLocalMode: " + *err;
  return std::nullopt;
}

}  // namespace kpn::config
