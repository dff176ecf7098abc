#include "pkg/config/warnings.h"

#include "pkg/config/duration.h"
#include "pkg/services/node_config.h"
#include "pkg/services/scheduler.h"

namespace kpn::config {

namespace {

std::string joinCidrs(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& c : v) s += (s.empty() ? "" : ", ") + c;
  return s;
}

}  // namespace

namespace {

// The migration from iptables mode (issue 29): upstream's iptables mode answers NodePorts on
// 127.0.0.1 by default (iptables.localhostNodePorts, route_localnet); nftables mode, ours
// included, only with a loopback entry in nodePortAddresses, and then over TCP only.
void localhostNodePortNotes(const ProxyConfig& c, bool fromConfigFile, StartupNotes& n) {
  services::NodeConfig cfg;
  for (const std::string& a : c.nodePortAddresses)
    if (!services::isNodePortAddressEntry(a)) return;  // refused by validation before this matters
  services::applyNodePortAddresses(c.nodePortAddresses, cfg);
  auto gate = c.featureGates.find(kLocalhostNodePortsGate);
  const bool gateOff = gate != c.featureGates.end() && !gate->second;
  const bool served = (cfg.localhostNodePortsV4 || cfg.localhostNodePortsV6) && !gateOff;
  const bool iptablesMode = c.mode == "iptables" || (c.mode.empty() && fromConfigFile);
  if (iptablesMode && c.iptables.localhostNodePorts && !cfg.localhostNodePortsV4) {
    n.warnings.push_back(
        "iptables.localhostNodePorts: true (upstream's default): iptables mode answers NodePorts on 127.0.0.1 too; "
        "here they answer there only with a loopback entry in nodePortAddresses, e.g. [primary, localhost] "
        "(TCP through a listener, as upstream's nftables mode since 1.37; UDP and SCTP refused): docs/migration.md");
  } else if (iptablesMode && cfg.localhostNodePortsV4 && served) {
    n.info.push_back("nodePortAddresses has a loopback entry: TCP NodePorts answer on 127.0.0.1 through a listener, "
                     "not through route_localnet as in iptables mode; UDP and SCTP there are refused");
  }
  if (gateOff && (cfg.localhostNodePortsV4 || cfg.localhostNodePortsV6))
    n.warnings.push_back(std::string("featureGates.") + kLocalhostNodePortsGate +
                         ": false: no NodePorts on loopback although nodePortAddresses has a loopback entry");
}

}  // namespace

StartupNotes startupNotes(const ProxyConfig& c, bool fromConfigFile) {
  StartupNotes n;
  auto& w = n.warnings;
  if (c.mode == "iptables" || c.mode == "ipvs")
    w.push_back("mode: \"" + c.mode + "\" is not implemented by kube-proxy-nft; running in nftables mode");
  // What the scheduler named does here (the mapping is render's; its warnings come from toNodeConfig).
  if (!c.ipvs.scheduler.empty()) {
    services::SchedulerChoice s = services::parseScheduler(c.ipvs.scheduler);
    if (s.known)
      n.info.push_back("ipvs.scheduler: \"" + c.ipvs.scheduler + "\": new connections are balanced " +
                       services::schedulerName(s.scheduler) + " (docs/schedulers.md)");
  } else if (c.mode == "ipvs") {
    n.info.push_back("ipvs.scheduler unset: IPVS would balance round-robin (rr); kube-proxy-nft's default is random, "
                     "as upstream's nftables mode (set rr for round-robin; docs/schedulers.md)");
  }
  if (c.mode == "ipvs") {
    if (!c.ipvs.excludeCIDRs.empty())
      n.info.push_back("ipvs.excludeCIDRs: [" + joinCidrs(c.ipvs.excludeCIDRs) + "] accepted; nothing to do: kube-proxy-nft never touches IPVS");
    if (c.ipvs.strictARP) w.push_back("ipvs.strictARP: true not honoured (no kube-ipvs0 interface here)");
    if (c.ipvs.tcpTimeout.count() || c.ipvs.tcpFinTimeout.count() || c.ipvs.udpTimeout.count())
      w.push_back("ipvs.tcpTimeout/tcpFinTimeout/udpTimeout not honoured (IPVS timeouts; see conntrack.* for ours)");
  }
  if (!c.iptables.localhostNodePorts && c.mode != "ipvs")
    n.info.push_back("iptables.localhostNodePorts: false: NodePorts answer on loopback only with a loopback entry in "
                     "nodePortAddresses, as in upstream's nftables mode");
  if (c.iptables.snatNodeInternalIP) w.push_back("iptables.snatNodeInternalIP: true not honoured");
  if (!c.portRange.empty()) w.push_back("portRange: \"" + c.portRange + "\" ignored (unused since the userspace proxy, upstream too)");
  localhostNodePortNotes(c, fromConfigFile, n);
  for (const auto& [gate, on] : c.featureGates)
    if (gate != kLocalhostNodePortsGate)
      w.push_back("featureGates." + gate + ": " + (on ? "true" : "false") + " ignored: kube-proxy-nft implements no feature gate");
  if (c.enableProfiling) w.push_back("enableProfiling: true not honoured (no /debug/pprof)");
  if (!c.showHiddenMetricsForVersion.empty())
    w.push_back("showHiddenMetricsForVersion: \"" + c.showHiddenMetricsForVersion + "\" ignored (no hidden metrics)");
  if (c.bindAddress != "0.0.0.0" && c.bindAddress != "::")
    w.push_back("bindAddress: \"" + c.bindAddress + "\" not honoured: the primary node IP comes from the Node object");
  if (c.clientConnection.contentType != "application/vnd.kubernetes.protobuf" && c.clientConnection.contentType != "application/json")
    w.push_back("clientConnection.contentType: \"" + c.clientConnection.contentType + "\" ignored (the daemon speaks JSON)");
  if (!c.clientConnection.acceptContentTypes.empty())
    w.push_back("clientConnection.acceptContentTypes: \"" + c.clientConnection.acceptContentTypes + "\" ignored (the daemon speaks JSON)");
  if (!c.winkernel.networkName.empty() || !c.winkernel.sourceVip.empty() || c.winkernel.enableDSR ||
      !c.winkernel.rootHnsEndpointName.empty() || c.winkernel.forwardHealthCheckVip || c.windowsRunAsService)
    w.push_back("winkernel.*, windowsRunAsService: Windows only; ignored");
  if (c.configSyncPeriod != std::chrono::minutes(15))
    n.info.push_back("configSyncPeriod: \"" + formatGoDuration(c.configSyncPeriod) +
                     "\" accepted; the watches need no periodic resync (a relist follows every expired watch)");
  return n;
}

}  // namespace kpn::config
