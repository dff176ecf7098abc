#include "pkg/config/warnings.h"

#include "pkg/sync/duration.h"

namespace kpn::config {

namespace {

std::string joinCidrs(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& c : v) s += (s.empty() ? "" : ", ") + c;
  return s;
}

}  // namespace

StartupNotes startupNotes(const ProxyConfig& c) {
  StartupNotes n;
  auto& w = n.warnings;
  if (c.mode == "iptables" || c.mode == "ipvs")
    w.push_back("mode: \"" + c.mode + "\" is not implemented by kube-proxy-nft; running in nftables mode");
  if (c.mode == "ipvs") {
    // The node's default scheduler either way (toNodeConfig warns about the names it maps).
    std::string s = c.ipvs.scheduler.empty() ? "rr" : c.ipvs.scheduler;
    if (c.ipvs.scheduler.empty())
      n.info.push_back("ipvs.scheduler: empty (IPVS's rr); services without the kube-proxy-nft.io/scheduler annotation "
                       "pick at random (numgen random), the nftables default");
    else
      n.info.push_back("ipvs.scheduler: \"" + s + "\" kept: the scheduler of services without the "
                       "kube-proxy-nft.io/scheduler annotation (docs/schedulers.md)");
    if (!c.ipvs.excludeCIDRs.empty())
      n.info.push_back("ipvs.excludeCIDRs: [" + joinCidrs(c.ipvs.excludeCIDRs) + "] accepted; nothing to do: kube-proxy-nft never touches IPVS");
    if (c.ipvs.strictARP) w.push_back("ipvs.strictARP: true not honoured (no kube-ipvs0 interface here)");
    if (c.ipvs.tcpTimeout.count() || c.ipvs.tcpFinTimeout.count() || c.ipvs.udpTimeout.count())
      w.push_back("ipvs.tcpTimeout/tcpFinTimeout/udpTimeout not honoured (IPVS timeouts; see conntrack.* for ours)");
  }
  if (!c.iptables.localhostNodePorts && c.mode != "ipvs")
    n.info.push_back("iptables.localhostNodePorts: false is what nftables mode always does (no NodePorts on 127.0.0.1)");
  if (c.iptables.snatNodeInternalIP) w.push_back("iptables.snatNodeInternalIP: true not honoured");
  if (!c.portRange.empty()) w.push_back("portRange: \"" + c.portRange + "\" ignored (unused since the userspace proxy, upstream too)");
  for (const auto& [gate, on] : c.featureGates)
    w.push_back("featureGates." + gate + ": " + (on ? "true" : "false") + " ignored: kube-proxy-nft implements no feature gate");
  if (c.enableProfiling) w.push_back("enableProfiling: true not honoured (no /debug/pprof)");
  if (!c.showHiddenMetricsForVersion.empty())
    w.push_back("showHiddenMetricsForVersion: \"" + c.showHiddenMetricsForVersion + "\" ignored (no hidden metrics)");
  if (c.bindAddress != "0.0.0.0" && c.bindAddress != "::")
    w.push_back("bindAddress: \"" + c.bindAddress + "\" not honoured: the primary node IP comes from the Node object");
  if (c.logging.format == "json") w.push_back("logging.format: \"json\" not honoured; logging stays text (glog)");
  if (c.clientConnection.contentType != "application/vnd.kubernetes.protobuf" && c.clientConnection.contentType != "application/json")
    w.push_back("clientConnection.contentType: \"" + c.clientConnection.contentType + "\" ignored (the daemon speaks JSON)");
  if (!c.clientConnection.acceptContentTypes.empty())
    w.push_back("clientConnection.acceptContentTypes: \"" + c.clientConnection.acceptContentTypes + "\" ignored (the daemon speaks JSON)");
  if (!c.winkernel.networkName.empty() || !c.winkernel.sourceVip.empty() || c.winkernel.enableDSR ||
      !c.winkernel.rootHnsEndpointName.empty() || c.winkernel.forwardHealthCheckVip || c.windowsRunAsService)
    w.push_back("winkernel.*, windowsRunAsService: Windows only; ignored");
  if (c.configSyncPeriod != std::chrono::minutes(15))
    n.info.push_back("configSyncPeriod: \"" + sync::formatGoDuration(c.configSyncPeriod) +
                     "\" accepted; the watches need no periodic resync (a relist follows every expired watch)");
  return n;
}

}  // namespace kpn::config
