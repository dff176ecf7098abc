// Behaviour of ClusterIP traffic, asked of the packet evaluator: which endpoints can answer, with
// which probability and which source address they see, or refused / dropped / untouched. No
// table object is named here: these tests must hold for any table layout.
#include <doctest/doctest.h>

#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

Ep ready(const std::string& ip, const std::string& node) { return {ip, true, true, false, node}; }
Ep terminating(const std::string& ip, const std::string& node, bool serving = true) { return {ip, false, serving, true, node}; }

// ns/web: 172.30.0.10 and fd00:172:30::10, port http 80 → 8080; one endpoint here, one on node-b.
void addWeb(World& w) {
  w.st.upsertService(service("ns", "web", {"172.30.0.10", "fd00:172:30::10"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)}, {ready("10.0.1.7", "node-a"), ready("10.0.2.1", "node-b")}));
  w.st.upsertSlice(slice("ns", "web-6", "web", {epPort("http", 8080)},
                         {ready("fd00:10:0:1::7", "node-a"), ready("fd00:10:0:2::1", "node-b")}, "IPv6"));
}

}  // namespace

TEST_CASE("behaviour: a ClusterIP from a pod reaches every endpoint, equally likely, with the pod's address") {
  World w;
  addWeb(w);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
  CHECK(w.fromPod("fd00:172:30::10", 80) ==
        "[fd00:10:0:1::7]:8080 1/2 from fd00:10:0:1::5; [fd00:10:0:2::1]:8080 1/2 from fd00:10:0:1::5");
  // A pod on another node (inside the cluster CIDR) is not masqueraded either.
  CHECK(w.fromOutside("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9") ==
        "10.0.1.7:8080 1/2 from 10.0.2.9; 10.0.2.1:8080 1/2 from 10.0.2.9");
  // Four endpoints: 1/4 each.
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)},
                         {ready("10.0.1.7", "node-a"), ready("10.0.2.1", "node-b"), ready("10.0.2.2", "node-b"), ready("10.0.3.1", "")}));
  CHECK(w.fromPod("172.30.0.10", 80) ==
        "10.0.1.7:8080 1/4 from 10.0.1.5; 10.0.2.1:8080 1/4 from 10.0.1.5; 10.0.2.2:8080 1/4 from 10.0.1.5; 10.0.3.1:8080 1/4 from 10.0.1.5");
}

TEST_CASE("behaviour: a ClusterIP from the node or from outside the cluster CIDR is masqueraded") {
  World w;
  addWeb(w);
  CHECK(w.fromNode("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 192.168.0.2");
  CHECK(w.fromNode("fd00:172:30::10", 80) ==
        "[fd00:10:0:1::7]:8080 1/2 from 2001:db8::1; [fd00:10:0:2::1]:8080 1/2 from 2001:db8::1");
  CHECK(w.fromOutside("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 192.168.0.2");
  CHECK(w.fromOutside("fd00:172:30::10", 80) ==
        "[fd00:10:0:1::7]:8080 1/2 from 2001:db8::1; [fd00:10:0:2::1]:8080 1/2 from 2001:db8::1");
}

TEST_CASE("behaviour: --masquerade-all masquerades pods too; without a cluster CIDR nobody is") {
  World w;
  addWeb(w);
  w.cfg.masqueradeAll = true;
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 192.168.0.2");
  CHECK(w.fromPod("fd00:172:30::10", 80) ==
        "[fd00:10:0:1::7]:8080 1/2 from 2001:db8::1; [fd00:10:0:2::1]:8080 1/2 from 2001:db8::1");
  w.cfg.masqueradeAll = false;
  w.cfg.clusterCidrV4.reset();
  CHECK(w.fromOutside("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 198.51.100.50; 10.0.2.1:8080 1/2 from 198.51.100.50");
}

TEST_CASE("behaviour: each port and protocol goes to its own target port; an unknown port or protocol is refused") {
  World w;
  w.st.upsertService(service("ns", "dns", {"172.30.0.53"},
                             {port("dns", 53, api::Protocol::UDP), port("dns-tcp", 53), port("metrics", 9153),
                              port("sig", 2905, api::Protocol::SCTP)}));
  w.st.upsertSlice(slice("ns", "dns-1", "dns",
                         {epPort("dns", 5353, api::Protocol::UDP), epPort("dns-tcp", 5354), epPort("metrics", 9154),
                          epPort("sig", 2906, api::Protocol::SCTP)},
                         {ready("10.0.2.1", "node-b")}));
  CHECK(w.fromPod("172.30.0.53", 53, api::Protocol::UDP) == "10.0.2.1:5353 from 10.0.1.5");
  CHECK(w.fromPod("172.30.0.53", 53) == "10.0.2.1:5354 from 10.0.1.5");
  CHECK(w.fromPod("172.30.0.53", 9153) == "10.0.2.1:9154 from 10.0.1.5");
  CHECK(w.fromPod("172.30.0.53", 2905, api::Protocol::SCTP) == "10.0.2.1:2906 from 10.0.1.5");
  CHECK(w.fromPod("172.30.0.53", 9153, api::Protocol::UDP) == "refused");
  CHECK(w.fromPod("172.30.0.53", 80) == "refused");
  CHECK(w.fromNode("172.30.0.53", 80) == "refused");
  CHECK(w.fromOutside("172.30.0.53", 80) == "refused");
}

TEST_CASE("behaviour: a service without usable endpoints refuses connections, from pods, the node and outside") {
  World w;
  w.st.upsertService(service("ns", "empty", {"172.30.0.20", "fd00:172:30::20"}, {port("http", 80)}));
  CHECK(w.fromPod("172.30.0.20", 80) == "refused");
  CHECK(w.fromNode("172.30.0.20", 80) == "refused");
  CHECK(w.fromOutside("172.30.0.20", 80) == "refused");
  CHECK(w.fromPod("fd00:172:30::20", 80) == "refused");
  // Endpoints that are neither ready nor serving do not count.
  w.st.upsertSlice(slice("ns", "empty-1", "empty", {epPort("http", 80)},
                         {{"10.0.2.1", false, false, false, "node-b"}, terminating("10.0.2.2", "node-b", false)}));
  CHECK(w.fromPod("172.30.0.20", 80) == "refused");
}

TEST_CASE("behaviour: terminating endpoints serve only while no endpoint is ready") {
  World w;
  w.st.upsertService(service("ns", "t", {"172.30.0.30"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "t-1", "t", {epPort("http", 80)},
                         {ready("10.0.2.1", "node-b"), terminating("10.0.2.2", "node-b"), terminating("10.0.2.3", "node-b", false)}));
  CHECK(w.fromPod("172.30.0.30", 80) == "10.0.2.1:80 from 10.0.1.5");
  w.st.upsertSlice(slice("ns", "t-1", "t", {epPort("http", 80)},
                         {{"10.0.2.1", false, false, false, "node-b"}, terminating("10.0.2.2", "node-b"),
                          terminating("10.0.2.4", "node-a"), terminating("10.0.2.3", "node-b", false)}));
  CHECK(w.fromPod("172.30.0.30", 80) == "10.0.2.2:80 1/2 from 10.0.1.5; 10.0.2.4:80 1/2 from 10.0.1.5");
}

TEST_CASE("behaviour: an endpoint reaching itself through its service is masqueraded; the others see it as is") {
  World w;
  addWeb(w);
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.1.7") ==
        "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 10.0.1.7");
  CHECK(w.fromPod("fd00:172:30::10", 80, api::Protocol::TCP, "fd00:10:0:1::7") ==
        "[fd00:10:0:1::7]:8080 1/2 from 2001:db8::1; [fd00:10:0:2::1]:8080 1/2 from fd00:10:0:1::7");
}

TEST_CASE("behaviour: internalTrafficPolicy Local keeps pods and the node on this node's endpoints") {
  World w;
  addWeb(w);
  auto web = std::make_shared<api::Service>(*w.st.services.at("ns/web"));
  web->internalTrafficPolicy = "Local";
  w.st.upsertService(web);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 from 10.0.1.5");
  CHECK(w.fromPod("fd00:172:30::10", 80) == "[fd00:10:0:1::7]:8080 from fd00:10:0:1::5");
  CHECK(w.fromNode("172.30.0.10", 80) == "10.0.1.7:8080 from 192.168.0.2");
  // Endpoints only elsewhere: dropped (not refused), as upstream.
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)}, {ready("10.0.2.1", "node-b")}));
  CHECK(w.fromPod("172.30.0.10", 80) == "dropped");
  CHECK(w.fromNode("172.30.0.10", 80) == "dropped");
  // No endpoints at all: refused, as for any service.
  w.st.deleteSlice("ns", "web", "web-4");
  CHECK(w.fromPod("172.30.0.10", 80) == "refused");
}

TEST_CASE("behaviour: unallocated addresses of a ServiceCIDR are dropped; others pass untouched") {
  World w;
  addWeb(w);
  auto sc = std::make_shared<api::ServiceCIDR>();
  sc->meta.name = "kubernetes";
  sc->cidrs = {"172.30.0.0/16", "fd00:172:30::/112"};
  w.st.upsertServiceCIDR(sc);
  CHECK(w.fromPod("172.30.0.99", 80) == "dropped");
  CHECK(w.fromNode("172.30.0.99", 80) == "dropped");
  CHECK(w.fromPod("fd00:172:30::99", 80) == "dropped");
  CHECK(w.fromPod("172.31.0.1", 80) == "untouched");
  CHECK(w.fromPod("172.30.0.10", 81) == "refused");  // a known ClusterIP, an unknown port
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
}

TEST_CASE("behaviour: the four local-traffic detectors decide who is masqueraded") {
  World w;
  addWeb(w);
  const std::string kept = "10.0.1.7:8080 1/2 from 10.0.2.9; 10.0.2.1:8080 1/2 from 10.0.2.9";
  const std::string masq = "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 192.168.0.2";
  // ClusterCIDR (the default): any address of the cluster CIDR, whichever interface.
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9", "eth0") == kept);
  // NodeCIDR: only this node's pod CIDR (10.0.1.0/24).
  services::parseDetectLocal("NodeCIDR", "", "", w.cfg);
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9", "eth0") == masq);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
  CHECK(w.fromPod("fd00:172:30::10", 80, api::Protocol::TCP, "fd00:10:0:2::9") ==
        "[fd00:10:0:1::7]:8080 1/2 from 2001:db8::1; [fd00:10:0:2::1]:8080 1/2 from 2001:db8::1");
  // BridgeInterface: whatever arrives on the bridge, whatever its address.
  services::parseDetectLocal("BridgeInterface", "cni0", "", w.cfg);
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9", "cni0") == kept);
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9", "eth0") == masq);
  // InterfaceNamePrefix: any interface whose name starts with the prefix.
  services::parseDetectLocal("InterfaceNamePrefix", "", "veth", w.cfg);
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9", "veth7") == kept);
  CHECK(w.fromPod("172.30.0.10", 80, api::Protocol::TCP, "10.0.2.9", "cni0") == masq);
  CHECK(w.fromNode("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 192.168.0.2");
}

TEST_CASE("behaviour: headless, ExternalName and other proxies' services leave packets untouched") {
  World w;
  auto headless = service("ns", "headless", {}, {port("", 80)});
  headless->headless = true;
  w.st.upsertService(headless);
  auto other = service("ns", "other", {"172.30.0.9"}, {port("", 80)});
  other->meta.labels["service.kubernetes.io/service-proxy-name"] = "someone-else";
  w.st.upsertService(other);
  w.st.upsertSlice(slice("ns", "other-1", "other", {epPort("", 80)}, {ready("10.0.2.1", "node-b")}));
  CHECK(w.fromPod("172.30.0.9", 80) == "untouched");
  CHECK(w.fromNode("172.30.0.9", 80) == "untouched");
}

// Every count from 1 to 40 endpoints, grown one at a time and shrunk again on one live render:
// each count must reach exactly its endpoints at 1/N (the table counts small and large sets in
// different ways, and a count change must never leave a destination half-counted).
TEST_CASE("behaviour: every endpoint count from 1 to 40, growing and shrinking, reaches each endpoint at 1/N") {
  World w;
  w.st.upsertService(service("ns", "big", {"172.30.0.60"}, {port("http", 80)}));
  std::vector<Ep> eps;
  auto check = [&](size_t n) {
    INFO(n << " endpoints");
    eps.resize(n);
    for (size_t i = 0; i < n; ++i) eps[i] = ready("10.0.4." + std::to_string(i + 1), "node-b");
    w.st.upsertSlice(slice("ns", "big-4", "big", {epPort("http", 8080)}, eps));
    auto t = w.trace(packet(nft::eval::Entry::Prerouting, "10.0.1.5", "172.30.0.60", 80, api::Protocol::TCP, "veth1"));
    REQUIRE(t.candidates.size() == n);
    std::set<std::string> seen;
    for (const auto& c : t.candidates) {
      CHECK(c.probability == doctest::Approx(1.0 / n));
      seen.insert(c.address);
    }
    CHECK(seen.size() == n);
  };
  for (size_t n = 1; n <= 40; ++n) check(n);
  for (size_t n = 40; n >= 1; --n) check(n);
}
