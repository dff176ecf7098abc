#include "pkg/config/encode.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>

#include "pkg/config/duration.h"

namespace kpn::config {

namespace {

// The shortest decimal text that reads back as the same float.
std::string floatText(float f) {
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return buf;
}

class Writer {
 public:
  Writer() { out_ << YAML::BeginMap; }
  template <typename F>
  Writer& map(const char* key, F body) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    body(*this);
    out_ << YAML::EndMap;
    return *this;
  }
  Writer& str(const char* key, const std::string& v) {
    out_ << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
    return *this;
  }
  Writer& boolean(const char* key, bool v) {
    out_ << YAML::Key << key << YAML::Value << (v ? "true" : "false");
    return *this;
  }
  Writer& number(const char* key, const std::string& v) {
    out_ << YAML::Key << key << YAML::Value << v;
    return *this;
  }
  Writer& int32(const char* key, int32_t v) { return number(key, std::to_string(v)); }
  Writer& duration(const char* key, Duration d) { return str(key, formatGoDuration(d)); }
  Writer& strings(const char* key, const std::vector<std::string>& v) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& s : v) out_ << YAML::DoubleQuoted << s;
    out_ << YAML::EndSeq;
    return *this;
  }
  YAML::Emitter& raw() { return out_; }
  std::string text() {
    out_ << YAML::EndMap;
    return std::string(out_.c_str()) + "\n";
  }

 private:
  YAML::Emitter out_;
};

void logFormat(Writer& w, const LogFormatOptions& o) {
  w.str("infoBufferSize", o.infoBufferSize).boolean("splitStream", o.splitStream);
}

}  // namespace

std::string encodeProxyConfig(const ProxyConfig& c) {
  Writer w;
  w.str("apiVersion", kApiVersion);
  w.str("bindAddress", c.bindAddress).boolean("bindAddressHardFail", c.bindAddressHardFail);
  w.map("clientConnection", [&](Writer& s) {
    s.str("acceptContentTypes", c.clientConnection.acceptContentTypes)
        .int32("burst", c.clientConnection.burst)
        .str("contentType", c.clientConnection.contentType)
        .str("kubeconfig", c.clientConnection.kubeconfig)
        .number("qps", floatText(c.clientConnection.qps));
  });
  w.str("clusterCIDR", c.clusterCIDR).duration("configSyncPeriod", c.configSyncPeriod);
  w.map("conntrack", [&](Writer& s) {
    s.int32("maxPerCore", c.conntrack.maxPerCore)
        .int32("min", c.conntrack.min)
        .boolean("tcpBeLiberal", c.conntrack.tcpBeLiberal)
        .duration("tcpCloseWaitTimeout", c.conntrack.tcpCloseWaitTimeout)
        .duration("tcpEstablishedTimeout", c.conntrack.tcpEstablishedTimeout)
        .duration("udpStreamTimeout", c.conntrack.udpStreamTimeout)
        .duration("udpTimeout", c.conntrack.udpTimeout);
  });
  w.map("detectLocal", [&](Writer& s) {
    s.str("bridgeInterface", c.detectLocal.bridgeInterface)
        .str("interfaceNamePrefix", c.detectLocal.interfaceNamePrefix);
  });
  w.str("detectLocalMode", c.detectLocalMode).boolean("enableProfiling", c.enableProfiling);
  w.map("featureGates", [&](Writer& s) {
    for (const auto& [name, on] : c.featureGates) s.boolean(name.c_str(), on);
  });
  w.str("healthzBindAddress", c.healthzBindAddress).str("hostnameOverride", c.hostnameOverride);
  w.map("iptables", [&](Writer& s) {
    s.boolean("localhostNodePorts", c.iptables.localhostNodePorts)
        .boolean("masqueradeAll", c.iptables.masqueradeAll)
        .int32("masqueradeBit", c.iptables.masqueradeBit)
        .duration("minSyncPeriod", c.iptables.minSyncPeriod)
        .boolean("snatNodeInternalIP", c.iptables.snatNodeInternalIP)
        .duration("syncPeriod", c.iptables.syncPeriod);
  });
  w.map("ipvs", [&](Writer& s) {
    s.strings("excludeCIDRs", c.ipvs.excludeCIDRs)
        .duration("minSyncPeriod", c.ipvs.minSyncPeriod)
        .str("scheduler", c.ipvs.scheduler)
        .boolean("strictARP", c.ipvs.strictARP)
        .duration("syncPeriod", c.ipvs.syncPeriod)
        .duration("tcpFinTimeout", c.ipvs.tcpFinTimeout)
        .duration("tcpTimeout", c.ipvs.tcpTimeout)
        .duration("udpTimeout", c.ipvs.udpTimeout);
  });
  w.str("kind", kKind);
  w.map("logging", [&](Writer& s) {
    s.duration("flushFrequency", c.logging.flushFrequency).str("format", c.logging.format);
    s.map("options", [&](Writer& o) {
      o.map("json", [&](Writer& j) { logFormat(j, c.logging.json); });
      o.map("text", [&](Writer& t) { logFormat(t, c.logging.text); });
    });
    s.int32("verbosity", c.logging.verbosity);
    s.raw() << YAML::Key << "vmodule" << YAML::Value << YAML::BeginSeq;
    for (const VModule& m : c.logging.vmodule)
      s.raw() << YAML::BeginMap << YAML::Key << "filePattern" << YAML::Value << YAML::DoubleQuoted << m.filePattern
              << YAML::Key << "verbosity" << YAML::Value << m.verbosity << YAML::EndMap;
    s.raw() << YAML::EndSeq;
  });
  w.str("metricsBindAddress", c.metricsBindAddress).str("mode", c.mode);
  w.map("nftables", [&](Writer& s) {
    s.boolean("masqueradeAll", c.nftables.masqueradeAll)
        .int32("masqueradeBit", c.nftables.masqueradeBit)
        .duration("minSyncPeriod", c.nftables.minSyncPeriod)
        .duration("syncPeriod", c.nftables.syncPeriod);
  });
  w.strings("nodePortAddresses", c.nodePortAddresses).int32("oomScoreAdj", c.oomScoreAdj);
  w.str("portRange", c.portRange).str("showHiddenMetricsForVersion", c.showHiddenMetricsForVersion);
  w.map("winkernel", [&](Writer& s) {
    s.boolean("enableDSR", c.winkernel.enableDSR)
        .boolean("forwardHealthCheckVip", c.winkernel.forwardHealthCheckVip)
        .str("networkName", c.winkernel.networkName)
        .str("rootHnsEndpointName", c.winkernel.rootHnsEndpointName)
        .str("sourceVip", c.winkernel.sourceVip);
  });
  w.boolean("windowsRunAsService", c.windowsRunAsService);
  return w.text();
}

}  // namespace kpn::config
