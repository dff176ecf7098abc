// KubeProxyConfiguration decoding, defaults, validation, --write-config-to and the flag
// precedence of upstream's cmd/kube-proxy/app/options.go.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "pkg/api/utf8.h"

#include "pkg/config/command_line.h"
#include "pkg/config/decode.h"
#include "pkg/config/encode.h"
#include "pkg/config/node_config.h"
#include "pkg/config/validate.h"
#include "pkg/config/warnings.h"

using namespace kpn::config;
using namespace std::chrono;

namespace {

const char* const kHeader = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";

// The issue's ConfigMap (a typical kubeadm/tutorial one), verbatim.
const char* const kIssueConfigMap = R"(apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: "ipvs"
clusterCIDR: "10.244.0.0/16"
ipvs:
  scheduler: "rr"
  excludeCIDRs: ["10.96.0.10/32"]
conntrack:
  maxPerCore: 32768
metricsBindAddress: "0.0.0.0:10249"
)";

ProxyConfig decodeOk(const std::string& body) {
  ProxyConfig c;
  auto err = decodeProxyConfig(kHeader + body, c);
  INFO(body);
  REQUIRE_MESSAGE(!err, *err);
  return c;
}

std::string decodeErr(const std::string& text) {
  ProxyConfig c;
  auto err = decodeProxyConfig(text, c);
  REQUIRE_MESSAGE(err, "decoded without error: " << text);
  return *err;
}

// A fake file system for loadCommandLine.
ReadFile files(std::map<std::string, std::string> contents) {
  return [contents](const std::string& path, std::string* text, std::string* error) {
    auto it = contents.find(path);
    if (it == contents.end()) {
      *error = "cannot read: No such file or directory";
      return false;
    }
    *text = it->second;
    return true;
  };
}

Loaded load(const GivenFlags& flags, const ReadFile& fs = files({})) {
  Loaded l;
  auto err = loadCommandLine(flags, fs, l);
  REQUIRE_MESSAGE(!err, *err);
  return l;
}

std::string loadErr(const GivenFlags& flags, const ReadFile& fs = files({})) {
  Loaded l;
  auto err = loadCommandLine(flags, fs, l);
  REQUIRE(err);
  return *err;
}

}  // namespace

TEST_CASE("config: an empty KubeProxyConfiguration gets upstream's v1alpha1 defaults") {
  ProxyConfig c = decodeOk("");
  CHECK(c == ProxyConfig{});  // the value type's defaults are upstream's
  CHECK(c.bindAddress == "0.0.0.0");
  CHECK(c.healthzBindAddress == "0.0.0.0:10256");
  CHECK(c.metricsBindAddress == "127.0.0.1:10249");
  CHECK(c.clientConnection.qps == 5);
  CHECK(c.clientConnection.burst == 10);
  CHECK(c.clientConnection.contentType == "application/vnd.kubernetes.protobuf");
  CHECK(c.nftables.syncPeriod == seconds(30));
  CHECK(c.nftables.minSyncPeriod == seconds(1));
  CHECK(c.nftables.masqueradeBit == 14);
  CHECK(c.iptables.syncPeriod == seconds(30));
  CHECK(c.ipvs.syncPeriod == seconds(30));
  CHECK(c.ipvs.minSyncPeriod == seconds(0));
  CHECK(c.conntrack.maxPerCore == 32768);
  CHECK(c.conntrack.min == 131072);
  CHECK(c.conntrack.tcpEstablishedTimeout == hours(24));
  CHECK(c.conntrack.tcpCloseWaitTimeout == hours(1));
  CHECK(c.conntrack.udpTimeout == seconds(0));
  CHECK(c.oomScoreAdj == -999);
  CHECK(c.configSyncPeriod == minutes(15));
  CHECK(c.logging.format == "text");
  CHECK(c.logging.flushFrequency == seconds(5));
  CHECK(validate(c).empty());
}

TEST_CASE("config: the issue's ConfigMap, verbatim, decodes, validates and runs in nftables mode") {
  ProxyConfig c;
  auto err = decodeProxyConfig(kIssueConfigMap, c);
  REQUIRE_MESSAGE(!err, *err);
  CHECK(c.mode == "ipvs");
  CHECK(c.clusterCIDR == "10.244.0.0/16");
  CHECK(c.ipvs.scheduler == "rr");
  CHECK(c.ipvs.excludeCIDRs == std::vector<std::string>{"10.96.0.10/32"});
  CHECK(c.conntrack.maxPerCore == 32768);
  CHECK(c.conntrack.min == 131072);
  CHECK(c.metricsBindAddress == "0.0.0.0:10249");
  CHECK(c.healthzBindAddress == "0.0.0.0:10256");
  CHECK(c.nftables.syncPeriod == seconds(30));  // ipvs' default sync period
  CHECK(c.nftables.minSyncPeriod == seconds(1));
  CHECK(validate(c).empty());
  StartupNotes n = startupNotes(c);
  REQUIRE(n.warnings.size() == 1);  // one warning, naming the field
  CHECK(n.warnings[0] == "mode: \"ipvs\" is not implemented by kube-proxy-nft; running in nftables mode");
  bool schedulerNoted = false, excludeNoted = false;
  for (const std::string& i : n.info) {
    schedulerNoted |= i == "ipvs.scheduler: \"rr\": new connections are balanced round-robin (docs/schedulers.md)";
    excludeNoted |= i.rfind("ipvs.excludeCIDRs: [10.96.0.10/32] accepted", 0) == 0;
  }
  CHECK(schedulerNoted);
  CHECK(excludeNoted);
  kpn::services::NodeConfig nc;
  REQUIRE_FALSE(toNodeConfig(c, nc, nullptr));
  REQUIRE(nc.clusterCidrV4);
  CHECK(nc.clusterCidrV4->str() == "10.244.0.0/16");
  CHECK(nc.masqueradeMark == 0x4000);
  CHECK(nc.nodePortPrimary);
  CHECK(nc.scheduler == kpn::services::Scheduler::RoundRobin);  // what the start-up line says
}

TEST_CASE("config: the start-up line names the scheduler the rules use, for every IPVS name") {
  // Before: in ipvs mode "rr" was logged as "chosen at random" while the rules rotated, and the
  // others as "not honoured".
  for (const char* name : {"rr", "wrr", "sh", "mh", "lc", "random", "round-robin", "source-hash"}) {
    CAPTURE(name);
    ProxyConfig c = decodeOk(std::string("mode: ipvs\nipvs: {scheduler: ") + name + "}\n");
    kpn::services::NodeConfig nc;
    REQUIRE_FALSE(toNodeConfig(c, nc, nullptr));
    std::string expected = std::string("ipvs.scheduler: \"") + name + "\": new connections are balanced " +
                           kpn::services::schedulerName(nc.scheduler) + " (docs/schedulers.md)";
    StartupNotes n = startupNotes(c);
    CHECK(std::count(n.info.begin(), n.info.end(), expected) == 1);
    for (const std::string& line : n.info) CHECK_MESSAGE((line.find("scheduler") == std::string::npos || line == expected), line);
    for (const std::string& line : n.warnings) CHECK_MESSAGE(line.find("scheduler") == std::string::npos, line);
  }
  // Unset in ipvs mode: IPVS's default (rr) is not ours (random), and the line says so.
  StartupNotes n = startupNotes(decodeOk("mode: ipvs\n"));
  REQUIRE(n.info.size() == 1);
  CHECK(n.info[0].rfind("ipvs.scheduler unset: IPVS would balance round-robin (rr); kube-proxy-nft's default is random", 0) == 0);
}

TEST_CASE("config: every field decodes from YAML") {
  ProxyConfig c = decodeOk(R"(
featureGates: {Foo: true, Bar: false}
clientConnection: {kubeconfig: /etc/kp/kc, acceptContentTypes: "application/json", contentType: application/json, qps: 7.5, burst: 20}
logging:
  format: text
  flushFrequency: 10s
  verbosity: 3
  vmodule: [{filePattern: "sync*", verbosity: 5}]
  options: {text: {splitStream: true, infoBufferSize: "64Ki"}, json: {splitStream: false, infoBufferSize: 0}}
hostnameOverride: Node-A
bindAddress: 10.0.0.5
healthzBindAddress: 10.0.0.5:12345
metricsBindAddress: 127.0.0.1:12346
bindAddressHardFail: true
enableProfiling: true
showHiddenMetricsForVersion: "1.31"
mode: nftables
iptables: {masqueradeBit: 12, masqueradeAll: true, localhostNodePorts: false, snatNodeInternalIP: true, syncPeriod: 40s, minSyncPeriod: 2s}
ipvs: {syncPeriod: 50s, minSyncPeriod: 3s, scheduler: sh, excludeCIDRs: [10.0.0.0/8], strictARP: true, tcpTimeout: 1s, tcpFinTimeout: 2s, udpTimeout: 3s}
nftables: {masqueradeBit: 13, masqueradeAll: false, syncPeriod: 45s, minSyncPeriod: 250ms}
winkernel: {networkName: net1, sourceVip: 1.2.3.4, enableDSR: true, rootHnsEndpointName: r, forwardHealthCheckVip: true}
detectLocalMode: InterfaceNamePrefix
detectLocal: {bridgeInterface: cni0, interfaceNamePrefix: veth}
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
nodePortAddresses: [10.0.0.0/8, "fd00::/8"]
oomScoreAdj: -500
conntrack: {maxPerCore: 0, min: 1000, tcpEstablishedTimeout: 2h, tcpCloseWaitTimeout: 30m, tcpBeLiberal: true, udpTimeout: 30s, udpStreamTimeout: 2m}
configSyncPeriod: 5m
portRange: 30000-32767
windowsRunAsService: true
)");
  CHECK(c.featureGates == std::map<std::string, bool>{{"Bar", false}, {"Foo", true}});
  CHECK(c.clientConnection.kubeconfig == "/etc/kp/kc");
  CHECK(c.clientConnection.acceptContentTypes == "application/json");
  CHECK(c.clientConnection.contentType == "application/json");
  CHECK(c.clientConnection.qps == 7.5f);
  CHECK(c.clientConnection.burst == 20);
  CHECK(c.logging.flushFrequency == seconds(10));
  CHECK(c.logging.verbosity == 3);
  REQUIRE(c.logging.vmodule.size() == 1);
  CHECK(c.logging.vmodule[0].filePattern == "sync*");
  CHECK(c.logging.vmodule[0].verbosity == 5);
  CHECK(c.logging.options.text.splitStream);
  CHECK(c.logging.options.text.infoBufferSize == "64Ki");
  CHECK(c.logging.options.json.infoBufferSize == "0");
  CHECK(c.hostnameOverride == "Node-A");
  CHECK(c.bindAddress == "10.0.0.5");
  CHECK(c.healthzBindAddress == "10.0.0.5:12345");
  CHECK(c.metricsBindAddress == "127.0.0.1:12346");
  CHECK(c.bindAddressHardFail);
  CHECK(c.enableProfiling);
  CHECK(c.showHiddenMetricsForVersion == "1.31");
  CHECK(c.mode == "nftables");
  CHECK(c.iptables.masqueradeBit == 12);
  CHECK(c.iptables.masqueradeAll);
  CHECK_FALSE(c.iptables.localhostNodePorts);
  CHECK(c.iptables.snatNodeInternalIP);
  CHECK(c.iptables.syncPeriod == seconds(40));
  CHECK(c.iptables.minSyncPeriod == seconds(2));
  CHECK(c.ipvs.syncPeriod == seconds(50));
  CHECK(c.ipvs.minSyncPeriod == seconds(3));
  CHECK(c.ipvs.scheduler == "sh");
  CHECK(c.ipvs.excludeCIDRs == std::vector<std::string>{"10.0.0.0/8"});
  CHECK(c.ipvs.strictARP);
  CHECK(c.ipvs.tcpTimeout == seconds(1));
  CHECK(c.ipvs.tcpFinTimeout == seconds(2));
  CHECK(c.ipvs.udpTimeout == seconds(3));
  // nftables wins over iptables where it says something.
  CHECK(c.nftables.masqueradeBit == 13);
  CHECK_FALSE(c.nftables.masqueradeAll);
  CHECK(c.nftables.syncPeriod == seconds(45));
  CHECK(c.nftables.minSyncPeriod == milliseconds(250));
  CHECK(c.winkernel.networkName == "net1");
  CHECK(c.winkernel.sourceVip == "1.2.3.4");
  CHECK(c.winkernel.enableDSR);
  CHECK(c.winkernel.rootHnsEndpointName == "r");
  CHECK(c.winkernel.forwardHealthCheckVip);
  CHECK(c.detectLocalMode == "InterfaceNamePrefix");
  CHECK(c.detectLocal.bridgeInterface == "cni0");
  CHECK(c.detectLocal.interfaceNamePrefix == "veth");
  CHECK(c.clusterCIDR == "10.244.0.0/16,fd00:10:244::/56");
  CHECK(c.nodePortAddresses == std::vector<std::string>{"10.0.0.0/8", "fd00::/8"});
  CHECK(c.oomScoreAdj == -500);
  CHECK(c.conntrack.maxPerCore == 0);
  CHECK(c.conntrack.min == 1000);
  CHECK(c.conntrack.tcpEstablishedTimeout == hours(2));
  CHECK(c.conntrack.tcpCloseWaitTimeout == minutes(30));
  CHECK(c.conntrack.tcpBeLiberal);
  CHECK(c.conntrack.udpTimeout == seconds(30));
  CHECK(c.conntrack.udpStreamTimeout == minutes(2));
  CHECK(c.configSyncPeriod == minutes(5));
  CHECK(c.portRange == "30000-32767");
  CHECK(c.windowsRunAsService);
  CHECK(validate(c).empty());

  kpn::services::NodeConfig nc;
  REQUIRE_FALSE(toNodeConfig(c, nc, nullptr));
  CHECK(nc.masqueradeMark == (1u << 13));
  CHECK(nc.clusterCidrV6->str() == "fd00:10:244::/56");
  CHECK(nc.detectLocal == kpn::services::LocalDetectMode::InterfaceNamePrefix);
  CHECK(nc.podInterfaceNamePrefix == "veth");
  CHECK_FALSE(nc.nodePortPrimary);
  CHECK(nc.nodePortCidrs.size() == 2);
}

TEST_CASE("config: JSON decodes like YAML") {
  ProxyConfig c;
  auto err = decodeProxyConfig(R"({"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
    "mode": "nftables", "conntrack": {"maxPerCore": 0, "tcpBeLiberal": true}, "clientConnection": {"qps": 50, "burst": 100},
    "nodePortAddresses": ["primary"], "featureGates": {"X": true}})",
                               c);
  REQUIRE_MESSAGE(!err, *err);
  CHECK(c.mode == "nftables");
  CHECK(c.conntrack.maxPerCore == 0);
  CHECK(c.conntrack.tcpBeLiberal);
  CHECK(c.clientConnection.qps == 50);
  CHECK(c.clientConnection.burst == 100);
  CHECK(c.nodePortAddresses == std::vector<std::string>{"primary"});
  CHECK(c.featureGates.at("X"));
}

TEST_CASE("config: nftables fields left out come from the section of the mode named") {
  // iptables mode (or none): iptables.* as upstream's iptables proxier read them.
  ProxyConfig c = decodeOk("iptables: {syncPeriod: 1m, minSyncPeriod: 5s, masqueradeAll: true, masqueradeBit: 10}\n");
  CHECK(c.nftables.syncPeriod == minutes(1));
  CHECK(c.nftables.minSyncPeriod == seconds(5));
  CHECK(c.nftables.masqueradeAll);
  CHECK(c.nftables.masqueradeBit == 10);
  // ipvs mode: the sync periods from ipvs.*, masquerade from iptables.* (ipvs had none).
  c = decodeOk("mode: ipvs\nipvs: {syncPeriod: 2m, minSyncPeriod: 7s}\niptables: {syncPeriod: 1m, masqueradeAll: true}\n");
  CHECK(c.nftables.syncPeriod == minutes(2));
  CHECK(c.nftables.minSyncPeriod == seconds(7));
  CHECK(c.nftables.masqueradeAll);
  // What nftables says wins; what nobody says is nftables mode's default.
  c = decodeOk("nftables: {syncPeriod: 20s}\niptables: {syncPeriod: 1m, minSyncPeriod: 5s}\n");
  CHECK(c.nftables.syncPeriod == seconds(20));
  CHECK(c.nftables.minSyncPeriod == seconds(5));
  c = decodeOk("mode: ipvs\niptables: {syncPeriod: 1m}\n");
  CHECK(c.nftables.syncPeriod == seconds(30));
  // Zero is "unset" for these, as in upstream's defaulting.
  c = decodeOk("nftables: {syncPeriod: 0s, minSyncPeriod: 0s}\nconfigSyncPeriod: 0s\n");
  CHECK(c.nftables.syncPeriod == seconds(30));
  CHECK(c.nftables.minSyncPeriod == seconds(1));
  CHECK(c.configSyncPeriod == minutes(15));
}

TEST_CASE("config: addresses without a port get upstream's; an IPv6 bindAddress moves the defaults") {
  ProxyConfig c = decodeOk("healthzBindAddress: 10.1.2.3\nmetricsBindAddress: \"::1\"\n");
  CHECK(c.healthzBindAddress == "10.1.2.3:10256");
  CHECK(c.metricsBindAddress == "[::1]:10249");
  c = decodeOk("bindAddress: \"::\"\n");
  CHECK(c.healthzBindAddress == "[::]:10256");
  CHECK(c.metricsBindAddress == "[::1]:10249");
  CHECK(validate(c).empty());
}

TEST_CASE("config: unknown and duplicate fields are errors naming their path") {
  CHECK(decodeErr(std::string(kHeader) + "conntrack:\n  maxPerCore: 1\n  max: 5\n") == "unknown field \"conntrack.max\"");
  CHECK(decodeErr(std::string(kHeader) + "udpIdleTimeout: 250ms\n") == "unknown field \"udpIdleTimeout\"");
  CHECK(decodeErr(std::string(kHeader) + "logging:\n  options:\n    text:\n      colour: true\n") ==
        "unknown field \"logging.options.text.colour\"");
  CHECK(decodeErr(std::string(kHeader) + "logging:\n  vmodule:\n  - {filePattern: a, level: 2}\n") ==
        "unknown field \"logging.vmodule[0].level\"");
  CHECK(decodeErr(std::string(kHeader) + "mode: ipvs\nmode: nftables\n") == "duplicate field \"mode\"");
}

TEST_CASE("config: wrong types and bad values name the field and the value") {
  auto err = [](const std::string& body) { return decodeErr(std::string(kHeader) + body); };
  CHECK(err("conntrack: {maxPerCore: lots}\n") == "conntrack.maxPerCore: want an integer, got string \"lots\"");
  CHECK(err("conntrack: {maxPerCore: \"32768\"}\n") == "conntrack.maxPerCore: want an integer, got string \"32768\"");
  CHECK(err("conntrack: {maxPerCore: 1.5}\n") == "conntrack.maxPerCore: 1.5 is not an integer");
  CHECK(err("oomScoreAdj: 99999999999\n") == "oomScoreAdj: 99999999999 does not fit a 32-bit integer");
  CHECK(err("mode: 5\n") == "mode: want a string, got number 5");
  CHECK(err("bindAddressHardFail: maybe\n") == "bindAddressHardFail: want a bool (true or false), got string \"maybe\"");
  CHECK(err("nftables: {syncPeriod: 30}\n") == "nftables.syncPeriod: want a duration string (\"30s\", \"1m30s\"), got number 30");
  CHECK(err("nftables: {syncPeriod: 30 seconds}\n") ==
        "nftables.syncPeriod: \"30 seconds\" is not a duration (Go syntax: 500ms, 30s, 1h0m0s)");
  CHECK(err("ipvs: {excludeCIDRs: 10.0.0.0/8}\n") == "ipvs.excludeCIDRs: want a list of strings, got string \"10.0.0.0/8\"");
  CHECK(err("ipvs: {excludeCIDRs: [10.0.0.0/8, 7]}\n") == "ipvs.excludeCIDRs[1]: want a string, got number 7");
  CHECK(err("conntrack: 5\n") == "conntrack: want a map, got number 5");
  CHECK(err("featureGates: {A: yes-please}\n") == "featureGates.A: want a bool (true or false), got string \"yes-please\"");
  CHECK(err("clientConnection: {qps: fast}\n") == "clientConnection.qps: want a number, got string \"fast\"");
}

TEST_CASE("config: the document itself must be one KubeProxyConfiguration") {
  CHECK(decodeErr("kind: KubeProxyConfiguration\n") == "apiVersion: missing (want \"kubeproxy.config.k8s.io/v1alpha1\")");
  CHECK(decodeErr("apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n") ==
        "apiVersion: \"kubeproxy.config.k8s.io/v1alpha2\" is not \"kubeproxy.config.k8s.io/v1alpha1\"");
  CHECK(decodeErr("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n") ==
        "kind: \"KubeletConfiguration\" is not \"KubeProxyConfiguration\"");
  CHECK(decodeErr("") == "is empty (want a KubeProxyConfiguration)");
  CHECK(decodeErr("- a\n- b\n") == "the document is a list, not a KubeProxyConfiguration map");
  CHECK(decodeErr(std::string(kHeader) + "---\n" + kHeader) == "holds 2 documents (want one KubeProxyConfiguration)");
  CHECK(decodeErr("mode: [unclosed\n").rfind("does not parse as YAML or JSON: line ", 0) == 0);
}

TEST_CASE("config: a stray token after a flow mapping is refused, not looped on (found by unit/fuzz/kube_proxy_config)") {
  // yaml-cpp 0.7's LoadAll yields empty documents forever at a top-level ","; the fuzzer's input,
  // minimised by hand, and its original.
  CHECK(decodeErr("{\"kind\": \"KubeProxyConfiguration\"}, {}") ==
        "does not parse as YAML or JSON: line 1, column 35: unexpected token at the start of a document");
  const std::string found =
      "{\"apiVersion\": \"kubeprfig.k8s.io/v1alpha1\", \"kind\": \"KubeProxyConfiguration\",\n"
      "  iberal\": tru0, \"burst\": 100},\n    \"nodePortAddresses\": [\"primary\"], \"fe\"], "
      "\"featureGates\": {\"X\":\x19true}}";
  CHECK(decodeErr(found).rfind("does not parse as YAML or JSON: line ", 0) == 0);
}

TEST_CASE("config: bytes that are not UTF-8 are refused, not read one way and written back another (found by unit/fuzz/kube_proxy_config)") {
  // The fuzzer's input, shortened: `mode: nfta` followed by 0xC6 bytes (a lead byte without its
  // continuation). yaml-cpp read it; --write-config-to wrote a config that decodes differently.
  const std::string found = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nfta" +
                            std::string(40, '\xc6') + "\n";
  CHECK(decodeErr(found) == "is not valid UTF-8 (byte 84)");
  // Well-formed multi-byte text is fine where a string is (a comment here).
  ProxyConfig c;
  CHECK_FALSE(decodeProxyConfig("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                                        "# caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n",
                                        c));
}

TEST_CASE("config: yaml-cpp's \\N and \\_ escapes and control characters are refused, not written back as U+FFFD (found by unit/fuzz/kube_proxy_config)") {
  const std::string head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
  // yaml-cpp 0.7 decodes "\_" (U+00A0) and "\N" (U+0085) to the single bytes 0xA0 and 0x85;
  // --write-config-to wrote them back as U+FFFD.
  for (const char* escape : {"\\_", "\\N"}) {
    const std::string err = decodeErr(head + "metricsBindAddress: \"" + escape + "10249\"\n");
    CHECK(err.rfind("does not parse as YAML or JSON: line 3, column 21: a value that decodes to bytes that are not UTF-8", 0) == 0);
  }
  // The fuzzer's input: yaml-cpp reads a NUL byte as a backslash, so NUL then "_" was "\_".
  const std::string found = head + "mode: \"ipvs\"\nmetricsBindAddress: " + std::string(1, '\0') + "_10249\"\n";
  CHECK(decodeErr(found) == "does not parse as YAML or JSON: line 4, column 21: control characters are not allowed");
  CHECK(decodeErr(head + "mode: nft\x7f\n") == "does not parse as YAML or JSON: line 3, column 10: control characters are not allowed");
  CHECK(decodeErr(head + "mode: \xc2\x9b\n").find("control characters are not allowed") != std::string::npos);  // C1 CSI
  // What YAML allows stays allowed: tabs, CRLF, NEL, other escapes, non-ASCII text.
  ProxyConfig c;
  CHECK_FALSE(decodeProxyConfig(head + "mode:\t\"nftables\"\r\nhostnameOverride: \"n\\x41\\u00e9\"\n# \xc2\x85 caf\xc3\xa9\n", c));
  CHECK(c.hostnameOverride == "nA\xc3\xa9");
}

TEST_CASE("utf8: the boundaries of well-formed UTF-8") {
  using kpn::api::firstInvalidUtf8;
  CHECK_FALSE(firstInvalidUtf8(""));
  CHECK_FALSE(firstInvalidUtf8("plain ASCII"));
  CHECK_FALSE(firstInvalidUtf8("\xc2\x80 \xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xef\xbf\xbf \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf"));
  CHECK(firstInvalidUtf8("a\x80") == size_t(1));               // a continuation byte alone
  CHECK(firstInvalidUtf8("\xc0\xaf") == size_t(0));           // overlong '/'
  CHECK(firstInvalidUtf8("\xc1\xbf") == size_t(0));           // overlong
  CHECK(firstInvalidUtf8("\xe0\x9f\xbf") == size_t(0));       // overlong 3-byte
  CHECK(firstInvalidUtf8("\xed\xa0\x80") == size_t(0));       // a UTF-16 surrogate
  CHECK(firstInvalidUtf8("\xf0\x8f\xbf\xbf") == size_t(0));  // overlong 4-byte
  CHECK(firstInvalidUtf8("\xf4\x90\x80\x80") == size_t(0));  // above U+10FFFF
  CHECK(firstInvalidUtf8("\xf5\x80\x80\x80") == size_t(0));
  CHECK(firstInvalidUtf8("ab\xe2\x82") == size_t(2));          // cut short at the end
  CHECK(firstInvalidUtf8("\xe2\x28\xa1") == size_t(0));       // a bad continuation
  // The code points themselves, at each sequence length's ends.
  using kpn::api::decodeUtf8At;
  const std::string text = "a\xc2\x85\xdf\xbf\xef\xbf\xbe\xf4\x8f\xbf\xbf";
  const std::vector<std::pair<uint32_t, size_t>> expected = {{'a', 1}, {0x85, 2}, {0x7FF, 2}, {0xFFFE, 3}, {0x10FFFF, 4}};
  size_t at = 0;
  for (const auto& [value, length] : expected) {
    const auto cp = decodeUtf8At(text, at);
    REQUIRE(cp);
    CHECK(cp->value == value);
    CHECK(cp->length == length);
    at += cp->length;
  }
  CHECK(at == text.size());
  CHECK_FALSE(decodeUtf8At("\xc0\xaf", 0));
  CHECK_FALSE(decodeUtf8At("ab\xe2\x82", 2));
}

TEST_CASE("config: nodePortAddresses takes upstream 1.37's keywords, and primary beside other entries") {
  CHECK(validate(decodeOk("nodePortAddresses: [primary, 10.0.0.0/8, localhost, all]\n")).empty());
}

TEST_CASE("config: validation names the field, the value and the rule") {
  auto errorsOf = [](const std::string& body) {
    ProxyConfig c = decodeOk(body);
    std::vector<std::string> e = validate(c);
    REQUIRE(e.size() == 1);
    return e[0];
  };
  CHECK(errorsOf("mode: kernelspace\n") == "mode: \"kernelspace\": must be nftables, iptables, ipvs or empty");
  CHECK(errorsOf("oomScoreAdj: 1001\n") == "oomScoreAdj: 1001: must be within the range [-1000, 1000]");
  CHECK(errorsOf("nftables: {masqueradeBit: 32}\n") == "nftables.masqueradeBit: 32: must be within the range [0, 31]");
  CHECK(errorsOf("nftables: {syncPeriod: 1s, minSyncPeriod: 5s}\n") ==
        "nftables.syncPeriod: \"1s\": must be greater than or equal to nftables.minSyncPeriod (\"5s\")");
  CHECK(errorsOf("conntrack: {maxPerCore: -1}\n") == "conntrack.maxPerCore: -1: must be greater than or equal to 0");
  CHECK(errorsOf("conntrack: {udpTimeout: -5s}\n") == "conntrack.udpTimeout: \"-5s\": must be greater than or equal to 0");
  CHECK(errorsOf("bindAddress: node-a\n") == "bindAddress: \"node-a\": not a valid IP address");
  CHECK(errorsOf("healthzBindAddress: \"[::1]:99999\"\n") == "healthzBindAddress: \"[::1]:99999\": must be IP:port ([IPv6]:port)");
  CHECK(errorsOf("metricsBindAddress: localhost:10249\n") == "metricsBindAddress: \"localhost:10249\": must be IP:port ([IPv6]:port)");
  CHECK(errorsOf("clusterCIDR: 10.0.0.0/8,10.1.0.0/16\n").rfind("clusterCIDR: \"10.0.0.0/8,10.1.0.0/16\": must be one CIDR or an IPv4,IPv6 pair", 0) == 0);
  CHECK(errorsOf("nodePortAddresses: [primary, loopback]\n") == "nodePortAddresses[1]: \"loopback\": must be a valid CIDR, 'primary', 'localhost' or 'all'");
  CHECK(errorsOf("nodePortAddresses: [10.0.0.0/33]\n") == "nodePortAddresses[0]: \"10.0.0.0/33\": must be a valid CIDR, 'primary', 'localhost' or 'all'");
  CHECK(errorsOf("detectLocalMode: BridgeInterface\n") ==
        "detectLocal.bridgeInterface: \"\": must be an interface name with detectLocalMode BridgeInterface");
  CHECK(errorsOf("detectLocalMode: PodCIDR\n") ==
        "detectLocalMode: \"PodCIDR\": must be ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix");
  CHECK(errorsOf("portRange: 200-100\n") == "portRange: \"200-100\": must be a valid port range (e.g. 300-2000)");
  CHECK(errorsOf("mode: ipvs\nipvs: {scheduler: fastest}\n").rfind("ipvs.scheduler: \"fastest\": must be rr,", 0) == 0);
  CHECK(errorsOf("mode: ipvs\nipvs: {excludeCIDRs: [nope]}\n") == "ipvs.excludeCIDRs[0]: \"nope\": must be a valid CIDR");
  // As upstream, the ipvs section is only checked in ipvs mode.
  CHECK(validate(decodeOk("ipvs: {scheduler: fastest}\n")).empty());
  CHECK(validHostPort("0.0.0.0:0"));  // port 0: the server is off
  CHECK_FALSE(validHostPort("::1:10249"));
}

TEST_CASE("config: --write-config-to's YAML reads back to the same configuration") {
  ProxyConfig c = decodeOk(R"(
featureGates: {Foo: true}
clientConnection: {kubeconfig: "/etc/kp/kc", qps: 7.3, burst: 20}
logging: {verbosity: 4, vmodule: [{filePattern: "a*", verbosity: 2}], options: {text: {infoBufferSize: "64Ki"}}}
hostnameOverride: "true"
mode: ipvs
ipvs: {scheduler: rr, excludeCIDRs: ["10.96.0.10/32"], minSyncPeriod: 3s}
iptables: {localhostNodePorts: false}
nftables: {masqueradeAll: true, minSyncPeriod: 250ms}
clusterCIDR: "10.244.0.0/16"
nodePortAddresses: ["10.0.0.0/8"]
conntrack: {maxPerCore: 0, udpTimeout: 1m30s, tcpEstablishedTimeout: 1.5h}
portRange: "1000-2000"
)");
  std::string yaml = encodeProxyConfig(c);
  ProxyConfig back;
  auto err = decodeProxyConfig(yaml, back);
  REQUIRE_MESSAGE(!err, *err << "\n" << yaml);
  CHECK_MESSAGE(back == c, yaml);
  CHECK(back.hostnameOverride == "true");  // quoted: stays a string
  CHECK(encodeProxyConfig(back) == yaml);
  // The defaults too.
  REQUIRE_FALSE(decodeProxyConfig(encodeProxyConfig(ProxyConfig{}), back));
  CHECK(back == ProxyConfig{});
  CHECK(encodeProxyConfig(ProxyConfig{}).find("tcpEstablishedTimeout: \"24h0m0s\"") != std::string::npos);
}

TEST_CASE("flags: without --config each flag given sets its field, upstream's names") {
  Loaded l = load({{"kubeconfig", "/kc"}, {"kube-api-qps", "20"}, {"kube-api-burst", "40"},
                   {"metrics-bind-address", "0.0.0.0:9999"}, {"healthz-bind-address", "[::]:10256"},
                   {"bind-address-hard-fail", "true"}, {"proxy-mode", "iptables"}, {"masquerade-all", "true"},
                   {"cluster-cidr", "10.244.0.0/16"}, {"conntrack-max-per-core", "0"}, {"conntrack-min", "5"},
                   {"conntrack-tcp-timeout-established", "3h"}, {"conntrack-tcp-timeout-close-wait", "10m"},
                   {"conntrack-tcp-be-liberal", "true"}, {"conntrack-udp-timeout", "30s"},
                   {"conntrack-udp-timeout-stream", "2m"}, {"oom-score-adj", "-100"}, {"config-sync-period", "1m"},
                   {"detect-local-mode", "BridgeInterface"}, {"pod-bridge-interface", "cni0"},
                   {"iptables-masquerade-bit", "9"}, {"feature-gates", "A=true,B=false"}, {"v", "3"},
                   {"nodeport-addresses", "10.0.0.0/8"}, {"master", "https://x"}, {"manifests", "/m"}});
  const ProxyConfig& c = l.config;
  CHECK(c.clientConnection.kubeconfig == "/kc");
  CHECK(c.clientConnection.qps == 20);
  CHECK(c.clientConnection.burst == 40);
  CHECK(c.metricsBindAddress == "0.0.0.0:9999");
  CHECK(c.healthzBindAddress == "[::]:10256");
  CHECK(c.bindAddressHardFail);
  CHECK(c.mode == "iptables");
  CHECK(c.nftables.masqueradeAll);
  CHECK(c.nftables.masqueradeBit == 9);
  CHECK(c.clusterCIDR == "10.244.0.0/16");
  CHECK(c.conntrack.maxPerCore == 0);
  CHECK(c.conntrack.min == 5);
  CHECK(c.conntrack.tcpEstablishedTimeout == hours(3));
  CHECK(c.conntrack.tcpCloseWaitTimeout == minutes(10));
  CHECK(c.conntrack.tcpBeLiberal);
  CHECK(c.conntrack.udpTimeout == seconds(30));
  CHECK(c.conntrack.udpStreamTimeout == minutes(2));
  CHECK(c.oomScoreAdj == -100);
  CHECK(c.configSyncPeriod == minutes(1));
  CHECK(c.detectLocalMode == "BridgeInterface");
  CHECK(c.detectLocal.bridgeInterface == "cni0");
  CHECK(c.featureGates == std::map<std::string, bool>{{"A", true}, {"B", false}});
  CHECK(c.logging.verbosity == 3);
  CHECK(c.nodePortAddresses == std::vector<std::string>{"10.0.0.0/8"});
  CHECK(l.options.master == "https://x");
  CHECK(l.options.manifests == "/m");
  CHECK(l.ignoredFlags.empty());
}

TEST_CASE("flags: the sync-period flags follow the mode, ours win") {
  Loaded l = load({{"iptables-sync-period", "1m"}, {"iptables-min-sync-period", "2s"}, {"ipvs-sync-period", "5m"}});
  CHECK(l.config.nftables.syncPeriod == minutes(1));
  CHECK(l.config.nftables.minSyncPeriod == seconds(2));
  l = load({{"proxy-mode", "ipvs"}, {"iptables-sync-period", "1m"}, {"ipvs-sync-period", "5m"}, {"ipvs-min-sync-period", "3s"}});
  CHECK(l.config.nftables.syncPeriod == minutes(5));
  CHECK(l.config.nftables.minSyncPeriod == seconds(3));
  l = load({{"iptables-sync-period", "1m"}, {"sync-period", "10s"}, {"min-sync-period", "0"}});
  CHECK(l.config.nftables.syncPeriod == seconds(10));
  CHECK(l.config.nftables.minSyncPeriod == seconds(0));  // a flag can say 0: sync on every change
}

TEST_CASE("flags: the deprecated --healthz-port/--metrics-port, without --config only") {
  Loaded l = load({{"metrics-port", "0"}, {"healthz-bind-address", "10.0.0.1"}});
  CHECK(l.config.metricsBindAddress == "");  // off
  CHECK(l.config.healthzBindAddress == "10.0.0.1:10256");
  l = load({{"healthz-port", "0"}, {"write-config-to", "/out"}});
  CHECK(l.config.healthzBindAddress == "0.0.0.0:10256");  // not with --write-config-to
}

TEST_CASE("flags: beside --config, only --hostname-override, the logging flags and daemon flags count") {
  ReadFile fs = files({{"/cfg", kIssueConfigMap}});
  Loaded l = load({{"config", "/cfg"}, {"hostname-override", "  Node-7 "}, {"kubeconfig", "/kc"},
                   {"cluster-cidr", "10.1.0.0/16"}, {"metrics-bind-address", "127.0.0.1:1"}, {"v", "4"},
                   {"vmodule", "sync*=6"}, {"master", "https://api:6443"}, {"conntrack-max-per-core", "1"},
                   {"init-only", "true"}},
                  fs);
  CHECK(l.config.hostnameOverride == "node-7");  // trimmed and lowercased, as upstream
  CHECK(l.config.clientConnection.kubeconfig == "");  // --kubeconfig is ignored beside --config
  CHECK(l.config.clusterCIDR == "10.244.0.0/16");
  CHECK(l.config.metricsBindAddress == "0.0.0.0:10249");
  CHECK(l.config.conntrack.maxPerCore == 32768);
  CHECK(l.config.logging.verbosity == 4);
  REQUIRE(l.config.logging.vmodule.size() == 1);
  CHECK(l.config.logging.vmodule[0].filePattern == "sync*");
  CHECK(l.options.master == "https://api:6443");  // --master applies either way
  CHECK(l.options.initOnly);
  CHECK(l.ignoredFlags == std::vector<std::string>{"--cluster-cidr", "--conntrack-max-per-core", "--kubeconfig",
                                                   "--metrics-bind-address"});
  // The file's own hostnameOverride and verbosity count when no flag says otherwise.
  fs = files({{"/cfg", std::string(kHeader) + "hostnameOverride: from-file\nlogging: {verbosity: 2}\n"}});
  l = load({{"config", "/cfg"}}, fs);
  CHECK(l.config.hostnameOverride == "from-file");
  CHECK(l.config.logging.verbosity == 2);
  CHECK(loadErr({{"config", "/cfg"}, {"hostname-override", "   "}}, fs) == "--hostname-override: an empty (blank) value is invalid");
}

TEST_CASE("flags: bad flags, unreadable and bad files are one line naming the flag, file and field") {
  CHECK(loadErr({{"kube-api-burst", "ten"}}) == "invalid value \"ten\" for --kube-api-burst: want a 32-bit integer");
  CHECK(loadErr({{"sync-period", "5"}}) == "invalid value \"5\" for --sync-period: want a Go duration (0s, 250ms, 1m)");
  CHECK(loadErr({{"config", "/nope"}}) == "--config=/nope: cannot read: No such file or directory");
  ReadFile fs = files({{"/cfg", std::string(kHeader) + "conntrack: {maxPerCore: 1, mystery: 2}\n"},
                       {"/bad", std::string(kHeader) + "oomScoreAdj: 5000\n"}});
  CHECK(loadErr({{"config", "/cfg"}}, fs) == "--config=/cfg: unknown field \"conntrack.mystery\"");
  CHECK(loadErr({{"config", "/bad"}}, fs) == "--config=/bad: oomScoreAdj: 5000: must be within the range [-1000, 1000]");
  CHECK(loadErr({{"oom-score-adj", "5000"}}) == "invalid configuration: oomScoreAdj: 5000: must be within the range [-1000, 1000]");
  CHECK(loadErr({{"no-such-flag", "1"}}) == "unknown flag --no-such-flag");
}

TEST_CASE("flags: a bad --nodeport-addresses entry is refused naming it, as the same value in --config is") {
  // Before: "10.0.0.0/33" was skipped with a warning and the node served NodePorts on "primary".
  CHECK(loadErr({{"nodeport-addresses", "10.0.0.0/33"}}) ==
        "invalid value \"10.0.0.0/33\" for --nodeport-addresses: must be a valid CIDR, 'primary', 'localhost' or 'all'");
  CHECK(loadErr({{"nodeport-addresses", "not-a-cidr,10.0.0.0/8"}}) ==
        "invalid value \"not-a-cidr\" for --nodeport-addresses: must be a valid CIDR, 'primary', 'localhost' or 'all'");
  CHECK(loadErr({{"nodeport-addresses", "10.0.0.0/8,,192.168.0.0/16"}}) ==
        "invalid value \"\" for --nodeport-addresses: must be a valid CIDR, 'primary', 'localhost' or 'all'");
  CHECK(loadErr({{"nodeport-addresses", "10.0.0.0/8,"}}) ==
        "invalid value \"\" for --nodeport-addresses: must be a valid CIDR, 'primary', 'localhost' or 'all'");
  CHECK(load({{"nodeport-addresses", "primary,localhost"}}).config.nodePortAddresses ==
        std::vector<std::string>{"primary", "localhost"});
  ReadFile fs = files({{"/cfg", std::string(kHeader) + "nodePortAddresses: [10.0.0.0/33]\n"}});
  CHECK(loadErr({{"config", "/cfg"}}, fs) ==
        "--config=/cfg: nodePortAddresses[0]: \"10.0.0.0/33\": must be a valid CIDR, 'primary', 'localhost' or 'all'");
  // Good values, and no warning about them.
  Loaded l = load({{"nodeport-addresses", "10.0.0.0/8,fd00::/64"}});
  CHECK(l.config.nodePortAddresses == std::vector<std::string>{"10.0.0.0/8", "fd00::/64"});
  CHECK(l.warnings.empty());
  CHECK(load({{"nodeport-addresses", "primary"}}).config.nodePortAddresses == std::vector<std::string>{"primary"});
  CHECK(load({{"nodeport-addresses", ""}}).config.nodePortAddresses.empty());
}

TEST_CASE("flags: the other list flags refuse a bad entry too") {
  CHECK(loadErr({{"cluster-cidr", "10.244.0.0/33"}}).rfind("invalid configuration: clusterCIDR: \"10.244.0.0/33\"", 0) == 0);
  CHECK(loadErr({{"feature-gates", "A=maybe"}}) == "invalid value \"maybe\" for --feature-gates: want true or false");
  CHECK(loadErr({{"vmodule", "loop=x"}}) == "invalid value \"x\" for --vmodule: want a 32-bit integer");
  CHECK(loadErr({{"vmodule", "=3"}}) == "invalid value \"=3\" for --vmodule: want PATTERN=N,...");
  // ipvs.excludeCIDRs is checked in ipvs mode only, as upstream (nothing reads it otherwise).
  CHECK(loadErr({{"proxy-mode", "ipvs"}, {"ipvs-exclude-cidrs", "10.0.0.0/8,nope"}}) ==
        "invalid configuration: ipvs.excludeCIDRs[1]: \"nope\": must be a valid CIDR");
}

TEST_CASE("config: the node name is the override, else the hostname, lowercased") {
  ProxyConfig c;
  CHECK(nodeName(c, "Host-A") == "host-a");
  c.hostnameOverride = " Node-1 ";
  CHECK(nodeName(c, "Host-A") == "node-1");
  CHECK(validate(c).empty());
  c.hostnameOverride = "  ";
  REQUIRE(validate(c).size() == 1);
  CHECK(validate(c)[0] == "hostnameOverride: \"  \": must not be blank");
}

TEST_CASE("config: every setting given that this daemon does not honour is one warning naming its field") {
  ProxyConfig c = decodeOk(R"(
mode: ipvs
ipvs: {scheduler: wrr, strictARP: true, tcpTimeout: 5s}
portRange: 30000-32767
featureGates: {Gate1: true}
enableProfiling: true
showHiddenMetricsForVersion: "1.30"
bindAddress: 10.0.0.9
logging: {format: json}
clientConnection: {contentType: application/yaml, acceptContentTypes: application/yaml}
winkernel: {enableDSR: true}
iptables: {snatNodeInternalIP: true}
)");
  REQUIRE(validate(c).empty());
  std::vector<std::string> w = startupNotes(c).warnings;
  // (ipvs.scheduler wrr is round-robin here, logged as such: toNodeConfig warns about the weights.
  // logging.format json is honoured.)
  const char* const fields[] = {"mode: \"ipvs\"", "ipvs.strictARP", "ipvs.tcpTimeout", "portRange: \"30000-32767\"",
                                "featureGates.Gate1: true", "enableProfiling", "showHiddenMetricsForVersion",
                                "bindAddress: \"10.0.0.9\"", "clientConnection.contentType",
                                "clientConnection.acceptContentTypes", "winkernel.*", "iptables.snatNodeInternalIP"};
  CHECK(w.size() == std::size(fields));
  for (const char* f : fields) {
    size_t n = 0;
    for (const std::string& line : w) n += line.rfind(f, 0) == 0;
    CHECK_MESSAGE(n == 1, f);
  }
  // The defaults and mode nftables: nothing to warn about.
  CHECK(startupNotes(decodeOk("mode: nftables\n")).warnings.empty());
  CHECK(startupNotes(ProxyConfig{}).warnings.empty());
}

TEST_CASE("config: iptables mode's localhost NodePorts: one warning naming the setting that keeps them (issue 29)") {
  auto warned = [](const StartupNotes& n) {
    size_t k = 0;
    for (const std::string& w : n.warnings) k += w.rfind("iptables.localhostNodePorts: true (upstream's default)", 0) == 0;
    return k;
  };
  // Upstream's default (true), in iptables mode: they would be lost silently.
  StartupNotes n = startupNotes(decodeOk("mode: iptables\n"));
  CHECK(warned(n) == 1);
  CHECK(n.warnings.size() == 2);  // and the mode itself
  bool namesTheFix = false;
  for (const std::string& w : n.warnings) namesTheFix |= w.find("nodePortAddresses, e.g. [primary, localhost]") != std::string::npos;
  CHECK(namesTheFix);
  // An empty mode in a --config file is upstream's iptables mode (before 1.40); on flags alone it is ours.
  CHECK(warned(startupNotes(decodeOk("mode: \"\"\n"), true)) == 1);
  CHECK(warned(startupNotes(ProxyConfig{}, false)) == 0);
  // Kept with a loopback entry (noted as TCP through a listener), or not wanted: no warning.
  n = startupNotes(decodeOk("mode: iptables\nnodePortAddresses: [primary, localhost]\n"));
  CHECK(warned(n) == 0);
  bool noted = false;
  for (const std::string& i : n.info) noted |= i.find("through a listener, not through route_localnet") != std::string::npos;
  CHECK(noted);
  CHECK(warned(startupNotes(decodeOk("mode: iptables\niptables: {localhostNodePorts: false}\n"))) == 0);
  CHECK(warned(startupNotes(decodeOk("mode: nftables\n"))) == 0);
  // Upstream 1.37's gate: true needs no warning here; false turns them off, and says so.
  n = startupNotes(decodeOk("featureGates: {KubeProxyNFTablesLocalhostNodePorts: true}\nnodePortAddresses: [localhost]\n"));
  CHECK(n.warnings.empty());
  n = startupNotes(decodeOk("featureGates: {KubeProxyNFTablesLocalhostNodePorts: false}\nnodePortAddresses: [localhost]\n"));
  REQUIRE(n.warnings.size() == 1);
  CHECK(n.warnings[0] == "featureGates.KubeProxyNFTablesLocalhostNodePorts: false: no NodePorts on loopback although nodePortAddresses has a loopback entry");
  kpn::services::NodeConfig cfg;
  REQUIRE_FALSE(toNodeConfig(decodeOk("featureGates: {KubeProxyNFTablesLocalhostNodePorts: false}\nnodePortAddresses: [localhost]\n"), cfg, nullptr));
  CHECK_FALSE(cfg.localhostNodePortsV4);
  REQUIRE_FALSE(toNodeConfig(decodeOk("nodePortAddresses: [localhost]\n"), cfg, nullptr));
  CHECK(cfg.localhostNodePortsV4);
}
