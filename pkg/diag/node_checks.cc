#include "pkg/diag/node_checks.h"

#include <net/if.h>

#include <fstream>
#include <map>
#include <sstream>

#include "nft/json_text.h"
#include "pkg/iptables/iptables_leftovers.h"
#include "pkg/services/family.h"

namespace kpn::diag {

namespace {

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

NodeCheck forwarding(const NodeFacts& f, const char* name, const char* path, const char* family, const char* sysctl) {
  auto v = f.readFile(path);
  if (!v) return {name, "info", std::string(family) + " is not enabled in this kernel or namespace (" + path + " is missing)"};
  if (trim(*v) == "1") return {name, "ok", std::string(family) + " forwarding is on"};
  return {name, "warning",
          std::string(family) + " forwarding is off (" + sysctl + " = " + trim(*v) +
              "): the node drops what it should pass on, so Service traffic to endpoints in pods (their veths are "
              "other interfaces) and from outside to pods never arrives; set " + sysctl + "=1"};
}

NodeCheck brNetfilter(const NodeFacts& f) {
  auto v4 = f.readFile("/proc/sys/net/bridge/bridge-nf-call-iptables");
  if (!v4)
    return {"br_netfilter", "info",
            "br_netfilter is not loaded: traffic between pods on one Linux bridge (a bridge CNI) does not pass "
            "nftables, so a pod reaching a Service whose endpoint is on its own bridge is not DNATed; load it "
            "(modprobe br_netfilter) if pods here share a bridge"};
  auto v6 = f.readFile("/proc/sys/net/bridge/bridge-nf-call-ip6tables");
  if (trim(*v4) != "1" || (v6 && trim(*v6) != "1"))
    return {"br_netfilter", "warning",
            "br_netfilter is loaded but bridged traffic skips the netfilter hooks (net.bridge.bridge-nf-call-iptables = " +
                trim(*v4) + (v6 ? ", ip6tables = " + trim(*v6) : std::string()) +
                "): pods on one bridge reach Services undnatted; set both to 1"};
  return {"br_netfilter", "ok", "br_netfilter is loaded and bridged traffic passes nftables"};
}

NodeCheck conntrack(const NodeFacts& f) {
  auto max = f.readFile("/proc/sys/net/netfilter/nf_conntrack_max");
  auto count = f.readFile("/proc/sys/net/netfilter/nf_conntrack_count");
  if (!max || !count)
    return {"conntrack", "unknown", "nf_conntrack is not loaded yet (our NAT rules load it)"};
  long long m = std::atoll(trim(*max).c_str()), c = std::atoll(trim(*count).c_str());
  std::string use = std::to_string(c) + " of " + std::to_string(m) + " entries in use";
  if (m > 0 && c * 10 >= m * 9)
    return {"conntrack", "warning",
            use + ": when the table is full the kernel drops new connections (\"nf_conntrack: table full\" in dmesg); "
                  "raise conntrack.maxPerCore / conntrack.min"};
  return {"conntrack", "ok", use};
}

NodeCheck ipvs(const NodeFacts& f) {
  bool iface = f.interfaceExists("kube-ipvs0");
  size_t services = 0;
  if (auto t = f.readFile("/proc/net/ip_vs")) {
    std::istringstream in(*t);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("TCP", 0) == 0 || line.rfind("UDP", 0) == 0 || line.rfind("SCTP", 0) == 0) ++services;
  }
  if (!iface && services == 0) return {"ipvs", "ok", "no IPVS leftovers (no kube-ipvs0, no IPVS virtual services)"};
  std::string what = iface ? "the kube-ipvs0 interface" : "";
  if (services) what += (what.empty() ? "" : " and ") + std::to_string(services) + " IPVS virtual services";
  return {"ipvs", "warning",
          what + " of upstream kube-proxy's IPVS mode are still here: IPVS answers those Service addresses before our "
                 "rules (kube-ipvs0 makes them local); remove them as docs/migration.md says (kube-proxy --cleanup "
                 "of upstream, or ip link delete kube-ipvs0 and ipvsadm --clear)"};
}

std::vector<NodeCheck> chainChecks(const NodeFacts& f) {
  std::string error;
  auto chains = f.chains(&error);
  if (!chains)
    return {{"iptables-nft", "unknown", "cannot list the nftables chains: " + error},
            {"forward-drop", "unknown", "cannot list the nftables chains: " + error}};
  std::vector<NodeCheck> out;
  std::map<std::string, size_t> upstream;  // "family table" -> KUBE-* chains of upstream's proxier
  for (const auto& c : *chains)
    if ((c.family == "ip" || c.family == "ip6") && (c.table == "nat" || c.table == "filter" || c.table == "mangle") &&
        iptables::isUpstreamIptablesChain(c.chain))
      ++upstream[c.family + " " + c.table];
  if (upstream.empty()) {
    out.push_back({"iptables-nft", "ok", "no chains of upstream kube-proxy's iptables mode in iptables-nft's tables"});
  } else {
    std::string where;
    for (const auto& [t, n] : upstream) where += (where.empty() ? "" : ", ") + std::to_string(n) + " in table " + t;
    out.push_back({"iptables-nft", "warning",
                   "chains of upstream kube-proxy's iptables mode are still here (" + where +
                       "): their rules may answer Service traffic before ours; --cleanup-iptables (the default) "
                       "removes them once our rules serve"});
  }
  bool any = false;
  for (const auto& c : *chains) {
    if (!c.base || c.hook != "forward" || c.policy != "drop") continue;
    if ((c.family == "ip" || c.family == "ip6") && c.table == "kube-proxy") continue;
    any = true;
    out.push_back({"forward-drop", "warning",
                   "table " + c.family + " " + c.table + " chain " + c.chain + " (priority " + std::to_string(c.priority) +
                       ") drops forwarded packets by policy: Service traffic forwarded to endpoints on other nodes or in "
                       "pods, and from outside to pods, passes only what a rule there accepts (a firewall or Docker's "
                       "FORWARD policy)"});
  }
  if (!any) out.push_back({"forward-drop", "ok", "no other base chain on the forward hook has a drop policy"});
  return out;
}

std::optional<std::string> readWhole(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::vector<NodeCheck> runNodeChecks(const NodeFacts& f) {
  std::vector<NodeCheck> out;
  out.push_back(forwarding(f, "ip_forward", "/proc/sys/net/ipv4/ip_forward", services::familyWord(net::Family::V4),
                           "net.ipv4.ip_forward"));
  out.push_back(forwarding(f, "ipv6_forwarding", "/proc/sys/net/ipv6/conf/all/forwarding",
                           services::familyWord(net::Family::V6), "net.ipv6.conf.all.forwarding"));
  out.push_back(brNetfilter(f));
  out.push_back(conntrack(f));
  if (auto legacy = iptables::legacyIptablesReport(f.readFile)) out.push_back({"iptables-legacy", "warning", *legacy});
  else out.push_back({"iptables-legacy", "ok", "no iptables-legacy (x_tables) tables"});
  out.push_back(ipvs(f));
  for (auto& c : chainChecks(f)) out.push_back(std::move(c));
  return out;
}

NodeFacts localNodeFacts() {
  NodeFacts f;
  f.readFile = readWhole;
  f.chains = iptables::listChains;
  f.interfaceExists = [](const char* name) { return if_nametoindex(name) != 0; };
  return f;
}

std::string nodeChecksJson(const std::vector<NodeCheck>& checks) {
  std::string out = "[";
  for (size_t i = 0; i < checks.size(); ++i)
    out += std::string(i ? "," : "") + "{\"name\":" + nft::jsonString(checks[i].name) +
           ",\"level\":" + nft::jsonString(checks[i].level) + ",\"message\":" + nft::jsonString(checks[i].message) + "}";
  return out + "]";
}

std::string nodeChecksText(const std::vector<NodeCheck>& checks) {
  std::string out = "node checks:\n";
  for (const auto& c : checks) out += "  [" + c.level + "] " + c.name + ": " + c.message + "\n";
  return out;
}

}  // namespace kpn::diag
