#include "pkg/config/fields.h"

namespace kpn::config {

namespace {

// One row: the member's path is the field's path in the document (proxy_config.h names its members
// as upstream's JSON names its fields), so it is written once.
#define KPN_FIELD(kind, member, ...) \
  ConfigField { #member, FieldKind::kind, {__VA_ARGS__}, +[](ProxyConfig& c) -> auto& { return c.member; } }

std::vector<ConfigField> makeFields() {
  return {
      KPN_FIELD(BoolMap, featureGates, "feature-gates"),
      KPN_FIELD(Text, clientConnection.kubeconfig, "kubeconfig"),
      KPN_FIELD(Text, clientConnection.acceptContentTypes),
      KPN_FIELD(Text, clientConnection.contentType, "kube-api-content-type"),
      KPN_FIELD(Float32, clientConnection.qps, "kube-api-qps"),
      KPN_FIELD(Int32, clientConnection.burst, "kube-api-burst"),
      KPN_FIELD(Text, logging.format, "logging-format"),
      KPN_FIELD(DurationOrNanos, logging.flushFrequency, "log-flush-frequency"),
      KPN_FIELD(Int32, logging.verbosity, "v"),
      KPN_FIELD(VModules, logging.vmodule, "vmodule"),
      KPN_FIELD(Bool, logging.options.text.splitStream, "log-text-split-stream"),
      KPN_FIELD(Quantity, logging.options.text.infoBufferSize, "log-text-info-buffer-size"),
      KPN_FIELD(Bool, logging.options.json.splitStream, "log-json-split-stream"),
      KPN_FIELD(Quantity, logging.options.json.infoBufferSize, "log-json-info-buffer-size"),
      KPN_FIELD(Text, hostnameOverride),  // --hostname-override has its own rule (command_line.cc)
      KPN_FIELD(Text, bindAddress, "bind-address"),
      KPN_FIELD(Text, healthzBindAddress, "healthz-bind-address"),
      KPN_FIELD(Text, metricsBindAddress, "metrics-bind-address"),
      KPN_FIELD(Bool, bindAddressHardFail, "bind-address-hard-fail"),
      KPN_FIELD(Bool, enableProfiling, "profiling"),
      KPN_FIELD(Text, showHiddenMetricsForVersion, "show-hidden-metrics-for-version"),
      KPN_FIELD(Text, mode, "proxy-mode"),
      // The sync periods' flags depend on the mode: command_line.cc's applySyncPeriods.
      KPN_FIELD(Int32, iptables.masqueradeBit, "iptables-masquerade-bit"),
      KPN_FIELD(Bool, iptables.masqueradeAll, "masquerade-all"),
      KPN_FIELD(Bool, iptables.localhostNodePorts, "iptables-localhost-nodeports"),
      KPN_FIELD(Bool, iptables.snatNodeInternalIP),
      KPN_FIELD(Duration, iptables.syncPeriod),
      KPN_FIELD(Duration, iptables.minSyncPeriod),
      KPN_FIELD(Duration, ipvs.syncPeriod),
      KPN_FIELD(Duration, ipvs.minSyncPeriod),
      KPN_FIELD(Text, ipvs.scheduler, "scheduler", "ipvs-scheduler"),
      KPN_FIELD(TextList, ipvs.excludeCIDRs, "ipvs-exclude-cidrs"),
      KPN_FIELD(Bool, ipvs.strictARP, "ipvs-strict-arp"),
      KPN_FIELD(Duration, ipvs.tcpTimeout, "ipvs-tcp-timeout"),
      KPN_FIELD(Duration, ipvs.tcpFinTimeout, "ipvs-tcpfin-timeout"),
      KPN_FIELD(Duration, ipvs.udpTimeout, "ipvs-udp-timeout"),
      KPN_FIELD(Int32, nftables.masqueradeBit, "iptables-masquerade-bit"),
      KPN_FIELD(Bool, nftables.masqueradeAll, "masquerade-all"),
      KPN_FIELD(Duration, nftables.syncPeriod),
      KPN_FIELD(Duration, nftables.minSyncPeriod),
      KPN_FIELD(Text, winkernel.networkName),
      KPN_FIELD(Text, winkernel.sourceVip),
      KPN_FIELD(Bool, winkernel.enableDSR),
      KPN_FIELD(Text, winkernel.rootHnsEndpointName),
      KPN_FIELD(Bool, winkernel.forwardHealthCheckVip),
      KPN_FIELD(Text, detectLocalMode, "detect-local-mode"),
      KPN_FIELD(Text, detectLocal.bridgeInterface, "pod-bridge-interface"),
      KPN_FIELD(Text, detectLocal.interfaceNamePrefix, "pod-interface-name-prefix"),
      KPN_FIELD(Text, clusterCIDR, "cluster-cidr"),
      KPN_FIELD(AddressList, nodePortAddresses, "nodeport-addresses"),
      KPN_FIELD(Int32, oomScoreAdj, "oom-score-adj"),
      KPN_FIELD(Int32, conntrack.maxPerCore, "conntrack-max-per-core"),
      KPN_FIELD(Int32, conntrack.min, "conntrack-min"),
      KPN_FIELD(Duration, conntrack.tcpEstablishedTimeout, "conntrack-tcp-timeout-established"),
      KPN_FIELD(Duration, conntrack.tcpCloseWaitTimeout, "conntrack-tcp-timeout-close-wait"),
      KPN_FIELD(Bool, conntrack.tcpBeLiberal, "conntrack-tcp-be-liberal"),
      KPN_FIELD(Duration, conntrack.udpTimeout, "conntrack-udp-timeout"),
      KPN_FIELD(Duration, conntrack.udpStreamTimeout, "conntrack-udp-timeout-stream"),
      KPN_FIELD(Duration, configSyncPeriod, "config-sync-period"),
      KPN_FIELD(Text, portRange),
      KPN_FIELD(Bool, windowsRunAsService),
  };
}

#undef KPN_FIELD

}  // namespace

const std::vector<ConfigField>& configFields() {
  static const std::vector<ConfigField> fields = makeFields();
  return fields;
}

std::vector<const ConfigField*> fieldsOfFlag(const std::string& flag) {
  std::vector<const ConfigField*> out;
  for (const ConfigField& f : configFields())
    for (const char* name : f.flags)
      if (flag == name) out.push_back(&f);
  return out;
}

bool operator==(const ProxyConfig& a, const ProxyConfig& b) {
  for (const ConfigField& f : configFields()) {
    bool same = std::visit([&](auto member) { return fieldValue(member, a) == fieldValue(member, b); }, f.member);
    if (!same) return false;
  }
  return true;
}

}  // namespace kpn::config
