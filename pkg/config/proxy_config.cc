#include "pkg/config/proxy_config.h"

#include <tuple>

namespace kpn::config {

bool operator==(const ClientConnection& a, const ClientConnection& b) {
  return std::tie(a.kubeconfig, a.acceptContentTypes, a.contentType, a.qps, a.burst) ==
         std::tie(b.kubeconfig, b.acceptContentTypes, b.contentType, b.qps, b.burst);
}

bool operator==(const VModule& a, const VModule& b) {
  return std::tie(a.filePattern, a.verbosity) == std::tie(b.filePattern, b.verbosity);
}

bool operator==(const LogFormatOptions& a, const LogFormatOptions& b) {
  return std::tie(a.splitStream, a.infoBufferSize) == std::tie(b.splitStream, b.infoBufferSize);
}

bool operator==(const Logging& a, const Logging& b) {
  return std::tie(a.format, a.flushFrequency, a.verbosity, a.vmodule, a.text, a.json) ==
         std::tie(b.format, b.flushFrequency, b.verbosity, b.vmodule, b.text, b.json);
}

bool operator==(const NFTables& a, const NFTables& b) {
  return std::tie(a.masqueradeBit, a.masqueradeAll, a.syncPeriod, a.minSyncPeriod) ==
         std::tie(b.masqueradeBit, b.masqueradeAll, b.syncPeriod, b.minSyncPeriod);
}

bool operator==(const IPTables& a, const IPTables& b) {
  return std::tie(a.masqueradeBit, a.masqueradeAll, a.localhostNodePorts, a.snatNodeInternalIP, a.syncPeriod,
                  a.minSyncPeriod) == std::tie(b.masqueradeBit, b.masqueradeAll, b.localhostNodePorts,
                                               b.snatNodeInternalIP, b.syncPeriod, b.minSyncPeriod);
}

bool operator==(const IPVS& a, const IPVS& b) {
  return std::tie(a.syncPeriod, a.minSyncPeriod, a.scheduler, a.excludeCIDRs, a.strictARP, a.tcpTimeout,
                  a.tcpFinTimeout, a.udpTimeout) == std::tie(b.syncPeriod, b.minSyncPeriod, b.scheduler,
                                                             b.excludeCIDRs, b.strictARP, b.tcpTimeout,
                                                             b.tcpFinTimeout, b.udpTimeout);
}

bool operator==(const Winkernel& a, const Winkernel& b) {
  return std::tie(a.networkName, a.sourceVip, a.rootHnsEndpointName, a.enableDSR, a.forwardHealthCheckVip) ==
         std::tie(b.networkName, b.sourceVip, b.rootHnsEndpointName, b.enableDSR, b.forwardHealthCheckVip);
}

bool operator==(const DetectLocal& a, const DetectLocal& b) {
  return std::tie(a.bridgeInterface, a.interfaceNamePrefix) == std::tie(b.bridgeInterface, b.interfaceNamePrefix);
}

bool operator==(const Conntrack& a, const Conntrack& b) {
  return std::tie(a.maxPerCore, a.min, a.tcpEstablishedTimeout, a.tcpCloseWaitTimeout, a.tcpBeLiberal, a.udpTimeout,
                  a.udpStreamTimeout) == std::tie(b.maxPerCore, b.min, b.tcpEstablishedTimeout,
                                                  b.tcpCloseWaitTimeout, b.tcpBeLiberal, b.udpTimeout,
                                                  b.udpStreamTimeout);
}

bool operator==(const KlogFlags& a, const KlogFlags& b) {
  return std::tie(a.logToStderr, a.alsoLogToStderr, a.stderrThreshold, a.logFile, a.logDir, a.logFileMaxSizeMB,
                  a.oneOutput, a.skipHeaders, a.skipLogHeaders, a.addDirHeader, a.logBacktraceAt) ==
         std::tie(b.logToStderr, b.alsoLogToStderr, b.stderrThreshold, b.logFile, b.logDir, b.logFileMaxSizeMB,
                  b.oneOutput, b.skipHeaders, b.skipLogHeaders, b.addDirHeader, b.logBacktraceAt);
}

bool operator==(const ProxyConfig& a, const ProxyConfig& b) {
  return std::tie(a.featureGates, a.clientConnection, a.logging, a.hostnameOverride, a.bindAddress,
                  a.healthzBindAddress, a.metricsBindAddress, a.bindAddressHardFail, a.enableProfiling,
                  a.showHiddenMetricsForVersion, a.mode, a.iptables, a.ipvs, a.nftables, a.winkernel,
                  a.detectLocalMode, a.detectLocal, a.clusterCIDR, a.nodePortAddresses, a.oomScoreAdj,
                  a.conntrack, a.configSyncPeriod, a.portRange, a.windowsRunAsService) ==
         std::tie(b.featureGates, b.clientConnection, b.logging, b.hostnameOverride, b.bindAddress,
                  b.healthzBindAddress, b.metricsBindAddress, b.bindAddressHardFail, b.enableProfiling,
                  b.showHiddenMetricsForVersion, b.mode, b.iptables, b.ipvs, b.nftables, b.winkernel,
                  b.detectLocalMode, b.detectLocal, b.clusterCIDR, b.nodePortAddresses, b.oomScoreAdj,
                  b.conntrack, b.configSyncPeriod, b.portRange, b.windowsRunAsService);
}

}  // namespace kpn::config
