#include "pkg/config/validate.h"

#include <cstdlib>

#include "pkg/config/duration.h"
#include "pkg/config/flag_values.h"
#include "pkg/net/ip.h"
#include "pkg/services/node_config.h"

namespace kpn::config {

namespace {

class Errors {
 public:
  void add(const std::string& path, const std::string& value, const std::string& rule) {
    list.push_back(path + ": " + value + ": " + rule);
  }
  void duration(const std::string& path, Duration d, bool zeroOk) {
    if (d < Duration(0) || (!zeroOk && d == Duration(0)))
      add(path, "\"" + formatGoDuration(d) + "\"", zeroOk ? "must be greater than or equal to 0" : "must be greater than 0");
  }
  void periods(const std::string& section, Duration sync, Duration minSync) {
    duration(section + ".syncPeriod", sync, false);
    duration(section + ".minSyncPeriod", minSync, true);
    if (minSync > sync)
      add(section + ".syncPeriod", "\"" + formatGoDuration(sync) + "\"",
          "must be greater than or equal to " + section + ".minSyncPeriod (\"" + formatGoDuration(minSync) + "\")");
  }
  void masqueradeBit(const std::string& path, int32_t bit) {
    if (bit < 0 || bit > 31) add(path, std::to_string(bit), "must be within the range [0, 31]");
  }
  std::vector<std::string> list;
};

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

bool isPort(const std::string& s) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::atoi(s.c_str()) <= 65535;
}

// utilnet.ParsePortRange: "", "N", "N-M" or "N+K".
bool validPortRange(const std::string& s) {
  if (s.empty()) return true;
  size_t sep = s.find_first_of("-+");
  if (sep == std::string::npos) return isPort(s);
  std::string a = s.substr(0, sep), b = s.substr(sep + 1);
  if (!isPort(a) || !isPort(b)) return false;
  return s[sep] == '+' || std::atoi(a.c_str()) <= std::atoi(b.c_str());
}

const char* const kModes[] = {"", "nftables", "iptables", "ipvs"};
// IPVS's names, and ours (--scheduler writes the same field).
const char* const kSchedulers[] = {"",   "rr",  "wrr", "lc", "wlc",    "lblc",        "lblcr",       "sh",
                                   "dh", "sed", "nq",  "mh", "random", "round-robin", "source-hash", "least-connection"};

template <size_t N>
bool oneOf(const std::string& v, const char* const (&list)[N]) {
  for (const char* s : list)
    if (v == s) return true;
  return false;
}

// component-base's logsapi.Validate, for the formats there are here.
void validateLogging(const Logging& l, Errors& e) {
  if (l.format != "text" && l.format != "json") e.add("logging.format", quoted(l.format), "must be text or json");
  if (l.verbosity < 0) e.add("logging.verbosity", std::to_string(l.verbosity), "must be greater than or equal to 0");
  if (l.flushFrequency <= Duration(0))
    e.add("logging.flushFrequency", quoted(formatGoDuration(l.flushFrequency)), "must be greater than 0");
  if (!l.vmodule.empty() && l.format != "text") e.add("logging.vmodule", quoted(l.format), "only for the text format");
  for (size_t i = 0; i < l.vmodule.size(); ++i) {
    const VModule& m = l.vmodule[i];
    std::string path = "logging.vmodule[" + std::to_string(i) + "]";
    if (m.filePattern.empty() || m.filePattern.find_first_of("=,") != std::string::npos)
      e.add(path, quoted(m.filePattern), "file pattern must not be empty nor contain an equal sign or comma");
    if (m.verbosity < 0) e.add(path, std::to_string(m.verbosity), "verbosity must be greater than or equal to 0");
  }
  for (const auto& [name, o] : {std::pair<const char*, const LogFormatOptions&>{"text", l.options.text}, {"json", l.options.json}})
    if (!isQuantity(o.infoBufferSize))
      e.add(std::string("logging.options.") + name + ".infoBufferSize", quoted(o.infoBufferSize),
            "must be a quantity (0, 512, 64Ki, 1M)");
}

}  // namespace

bool validHostPort(const std::string& s) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = s.substr(0, colon), port = s.substr(colon + 1);
  bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  auto ip = net::canonicalIp(host);
  if (!ip || (net::familyOf(*ip) == net::Family::V6) != bracketed) return false;
  return isPort(port);
}

std::vector<std::string> validate(const ProxyConfig& c) {
  Errors e;
  if (!oneOf(c.mode, kModes)) e.add("mode", quoted(c.mode), "must be nftables, iptables, ipvs or empty");
  e.masqueradeBit("nftables.masqueradeBit", c.nftables.masqueradeBit);
  e.periods("nftables", c.nftables.syncPeriod, c.nftables.minSyncPeriod);
  e.masqueradeBit("iptables.masqueradeBit", c.iptables.masqueradeBit);
  e.periods("iptables", c.iptables.syncPeriod, c.iptables.minSyncPeriod);
  if (c.mode == "ipvs") {  // as upstream: the ipvs section is checked in ipvs mode only
    e.periods("ipvs", c.ipvs.syncPeriod, c.ipvs.minSyncPeriod);
    e.duration("ipvs.tcpTimeout", c.ipvs.tcpTimeout, true);
    e.duration("ipvs.tcpFinTimeout", c.ipvs.tcpFinTimeout, true);
    e.duration("ipvs.udpTimeout", c.ipvs.udpTimeout, true);
    if (!oneOf(c.ipvs.scheduler, kSchedulers))
      e.add("ipvs.scheduler", quoted(c.ipvs.scheduler), "must be rr, wrr, lc, wlc, lblc, lblcr, sh, dh, sed, nq, mh, random, round-robin, source-hash, least-connection or empty");
    for (size_t i = 0; i < c.ipvs.excludeCIDRs.size(); ++i)
      if (!net::parseCidr(c.ipvs.excludeCIDRs[i]))
        e.add("ipvs.excludeCIDRs[" + std::to_string(i) + "]", quoted(c.ipvs.excludeCIDRs[i]), "must be a valid CIDR");
  }
  if (c.conntrack.maxPerCore < 0) e.add("conntrack.maxPerCore", std::to_string(c.conntrack.maxPerCore), "must be greater than or equal to 0");
  if (c.conntrack.min < 0) e.add("conntrack.min", std::to_string(c.conntrack.min), "must be greater than or equal to 0");
  e.duration("conntrack.tcpEstablishedTimeout", c.conntrack.tcpEstablishedTimeout, true);
  e.duration("conntrack.tcpCloseWaitTimeout", c.conntrack.tcpCloseWaitTimeout, true);
  e.duration("conntrack.udpTimeout", c.conntrack.udpTimeout, true);
  e.duration("conntrack.udpStreamTimeout", c.conntrack.udpStreamTimeout, true);
  if (c.clientConnection.burst < 0) e.add("clientConnection.burst", std::to_string(c.clientConnection.burst), "must be greater than or equal to 0");
  if (c.oomScoreAdj < -1000 || c.oomScoreAdj > 1000)
    e.add("oomScoreAdj", std::to_string(c.oomScoreAdj), "must be within the range [-1000, 1000]");
  e.duration("configSyncPeriod", c.configSyncPeriod, false);
  if (!c.hostnameOverride.empty() && c.hostnameOverride.find_first_not_of(" \t\r\n") == std::string::npos)
    e.add("hostnameOverride", quoted(c.hostnameOverride), "must not be blank");
  if (!net::canonicalIp(c.bindAddress)) e.add("bindAddress", quoted(c.bindAddress), "not a valid IP address");
  if (!c.healthzBindAddress.empty() && !validHostPort(c.healthzBindAddress))
    e.add("healthzBindAddress", quoted(c.healthzBindAddress), "must be IP:port ([IPv6]:port)");
  if (!c.metricsBindAddress.empty() && !validHostPort(c.metricsBindAddress))
    e.add("metricsBindAddress", quoted(c.metricsBindAddress), "must be IP:port ([IPv6]:port)");
  services::NodeConfig scratch;
  if (auto err = services::parseClusterCidrs(c.clusterCIDR, scratch))
    e.add("clusterCIDR", quoted(c.clusterCIDR), "must be one CIDR or an IPv4,IPv6 pair (" + *err + ")");
  for (size_t i = 0; i < c.nodePortAddresses.size(); ++i) {
    const std::string& a = c.nodePortAddresses[i];
    std::string path = "nodePortAddresses[" + std::to_string(i) + "]";
    if (!services::isNodePortAddressEntry(a)) e.add(path, quoted(a), services::kNodePortAddressEntryRule);
  }
  if (auto err = services::parseDetectLocal(c.detectLocalMode, c.detectLocal.bridgeInterface,
                                          c.detectLocal.interfaceNamePrefix, scratch)) {
    if (c.detectLocalMode == "BridgeInterface")
      e.add("detectLocal.bridgeInterface", quoted(c.detectLocal.bridgeInterface), "must be an interface name with detectLocalMode BridgeInterface");
    else if (c.detectLocalMode == "InterfaceNamePrefix")
      e.add("detectLocal.interfaceNamePrefix", quoted(c.detectLocal.interfaceNamePrefix), "must be an interface name prefix with detectLocalMode InterfaceNamePrefix");
    else
      e.add("detectLocalMode", quoted(c.detectLocalMode), "must be ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix");
  }
  if (!validPortRange(c.portRange)) e.add("portRange", quoted(c.portRange), "must be a valid port range (e.g. 300-2000)");
  validateLogging(c.logging, e);
  return e.list;
}

}  // namespace kpn::config
