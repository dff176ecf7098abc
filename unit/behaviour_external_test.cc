// Behaviour of external traffic — NodePorts, LoadBalancer and external IPs, traffic policies,
// source ranges, contested destinations — asked of the packet evaluator. No table object is
// named here: these tests must hold for any table layout.
#include <doctest/doctest.h>

#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

Ep ready(const std::string& ip, const std::string& node) { return {ip, true, true, false, node}; }

api::ServicePort npPort(const std::string& name, int32_t p, int32_t np, api::Protocol proto = api::Protocol::TCP) {
  auto sp = port(name, p, proto);
  sp.nodePort = np;
  return sp;
}

// A LoadBalancer with a nodePort, the external IP `ext` and the LB IP `lb` (either may be "").
std::shared_ptr<api::Service> lb(World& w, const std::string& name, const std::string& clusterIP, int32_t nodePort,
                                 const std::string& ext, const std::string& lbIP, const std::string& etp = "Cluster",
                                 const std::string& itp = "Cluster") {
  auto s = service("ns1", name, {clusterIP}, {npPort("p80", 80, nodePort)});
  s->type = "LoadBalancer";
  if (!ext.empty()) s->externalIPs = {ext};
  if (!lbIP.empty()) s->loadBalancerIngress = {{lbIP, "", ""}};
  s->externalTrafficPolicy = etp;
  s->internalTrafficPolicy = itp;
  s->meta.creationTimestamp = "2024-01-01T00:00:00Z";
  w.st.upsertService(s);
  return s;
}

// Endpoints 10.180.0.1 (node-b) and 10.180.2.1 (this node).
void remoteAndLocal(World& w, const std::string& svc) {
  w.st.upsertSlice(slice("ns1", svc + "-1", svc, {epPort("p80", 80)}, {ready("10.180.0.1", "node-b"), ready("10.180.2.1", "node-a")}));
}

const std::string kBothMasq = "10.180.0.1:80 1/2 from 192.168.0.2; 10.180.2.1:80 1/2 from 192.168.0.2";

}  // namespace

TEST_CASE("behaviour: a NodePort answers on the NodePort addresses, not on the node's other addresses, never on loopback") {
  World w;
  lb(w, "svc1", "172.30.0.41", 3001, "", "");
  remoteAndLocal(w, "svc1");
  CHECK(w.fromOutside(kNodeIP, 3001) == kBothMasq);  // eTP=Cluster: masqueraded
  CHECK(w.fromPod(kNodeIP, 3001) == kBothMasq);
  CHECK(w.fromNode(kNodeIP, 3001) == kBothMasq);
  CHECK(w.fromOutside(kOtherLocalIP, 3001) == "untouched");
  CHECK(w.fromOutside("192.168.1.2", 3001) == "untouched");
  CHECK(w.fromNode("127.0.0.1", 3001) == "untouched");  // the node's own socket, as upstream
  CHECK(w.fromOutside(kNodeIP, 3009) == "untouched");   // not a nodePort
  CHECK(w.fromOutside(kNodeIP, 3001, api::Protocol::UDP) == "untouched");

  // --nodeport-addresses as CIDRs: the host's addresses inside them (loopback never).
  services::applyNodePortAddresses({"192.168.0.0/24", "192.168.1.0/24", "127.0.0.0/8"}, w.cfg);
  CHECK(w.fromOutside(kOtherLocalIP, 3001) == kBothMasq);
  CHECK(w.fromOutside("192.168.1.2", 3001) == kBothMasq);
  CHECK(w.fromNode("127.0.0.1", 3001) == "untouched");  // localhost NodePorts are userspace listeners
  // A /0: every local address of that family, still not loopback.
  services::applyNodePortAddresses({"0.0.0.0/0"}, w.cfg);
  CHECK(w.fromOutside("192.168.1.2", 3001) == kBothMasq);
  CHECK(w.fromOutside(kNodeIP, 3001) == kBothMasq);
  CHECK(w.fromNode("127.0.0.1", 3001) == "untouched");
  CHECK(w.fromOutside("192.168.7.7", 3001) == "untouched");  // forwarded elsewhere: not ours
}

TEST_CASE("behaviour: NodePorts over IPv6, UDP and SCTP") {
  World w;
  auto s = service("ns1", "multi", {"172.30.0.50", "fd00:172:30::50"},
                   {npPort("dns", 53, 3053, api::Protocol::UDP), npPort("sig", 2905, 3905, api::Protocol::SCTP)});
  s->type = "NodePort";
  w.st.upsertService(s);
  w.st.upsertSlice(slice("ns1", "multi-4", "multi", {epPort("dns", 5353, api::Protocol::UDP), epPort("sig", 2906, api::Protocol::SCTP)},
                         {ready("10.180.0.1", "node-b")}));
  w.st.upsertSlice(slice("ns1", "multi-6", "multi", {epPort("dns", 5353, api::Protocol::UDP), epPort("sig", 2906, api::Protocol::SCTP)},
                         {ready("fd00:10:0:2::1", "node-b")}, "IPv6"));
  CHECK(w.fromOutside(kNodeIP, 3053, api::Protocol::UDP) == "10.180.0.1:5353 from 192.168.0.2");
  CHECK(w.fromOutside(kNodeIP, 3905, api::Protocol::SCTP) == "10.180.0.1:2906 from 192.168.0.2");
  CHECK(w.fromOutside(kNodeIP6, 3053, api::Protocol::UDP) == "[fd00:10:0:2::1]:5353 from 2001:db8::1");
  CHECK(w.fromOutside(kNodeIP6, 3053) == "untouched");  // TCP: no such nodePort
}

TEST_CASE("behaviour: LoadBalancer and external IPs with externalTrafficPolicy Cluster: every endpoint, masqueraded") {
  World w;
  auto s = lb(w, "svc1", "172.30.0.41", 3001, "192.168.99.11", "1.2.3.4");
  s->loadBalancerIngress.push_back({"1.2.3.7", "", "Proxy"});  // the load balancer proxies: nothing here
  w.st.upsertService(s);
  remoteAndLocal(w, "svc1");
  for (const char* ip : {"1.2.3.4", "192.168.99.11"}) {
    INFO(std::string(ip));
    CHECK(w.fromOutside(ip, 80) == kBothMasq);
    CHECK(w.fromPod(ip, 80) == kBothMasq);
    CHECK(w.fromNode(ip, 80) == kBothMasq);
    CHECK(w.fromOutside(ip, 81) == "untouched");  // not a service port of that address
  }
  CHECK(w.fromOutside("1.2.3.7", 80) == "untouched");
  // The ClusterIP keeps its own rules: pods are not masqueraded there.
  CHECK(w.fromPod("172.30.0.41", 80) == "10.180.0.1:80 1/2 from 10.0.1.5; 10.180.2.1:80 1/2 from 10.0.1.5");
}

TEST_CASE("behaviour: externalTrafficPolicy Local: outside clients reach this node's endpoints with their own address") {
  World w;
  lb(w, "svc2", "172.30.0.42", 3002, "192.168.99.22", "5.6.7.8", "Local");
  remoteAndLocal(w, "svc2");
  for (std::pair<const char*, uint16_t> dest : {std::pair<const char*, uint16_t>{"5.6.7.8", 80}, {"192.168.99.22", 80}, {kNodeIP, 3002}}) {
    INFO(std::string(dest.first));
    CHECK(w.fromOutside(dest.first, dest.second) == "10.180.2.1:80 from 198.51.100.50");
    // Pods short-circuit to every endpoint, keeping their address; the node too, masqueraded.
    CHECK(w.fromPod(dest.first, dest.second) == "10.180.0.1:80 1/2 from 10.0.1.5; 10.180.2.1:80 1/2 from 10.0.1.5");
    CHECK(w.fromNode(dest.first, dest.second) == kBothMasq);
  }
  CHECK(w.fromPod("172.30.0.42", 80) == "10.180.0.1:80 1/2 from 10.0.1.5; 10.180.2.1:80 1/2 from 10.0.1.5");

  // A second local endpoint: outside clients split between the two local ones.
  w.st.upsertSlice(slice("ns1", "svc2-1", "svc2", {epPort("p80", 80)},
                         {ready("10.180.0.1", "node-b"), ready("10.180.2.1", "node-a"), ready("10.180.2.2", "node-a")}));
  CHECK(w.fromOutside("5.6.7.8", 80) == "10.180.2.1:80 1/2 from 198.51.100.50; 10.180.2.2:80 1/2 from 198.51.100.50");
}

TEST_CASE("behaviour: externalTrafficPolicy Local without a local endpoint drops outside clients; pods and the node still get through") {
  World w;
  lb(w, "svc5", "172.30.0.45", 3005, "192.168.99.55", "5.6.7.9", "Local");
  w.st.upsertSlice(slice("ns1", "svc5-1", "svc5", {epPort("p80", 80)}, {ready("10.180.0.5", "node-b")}));
  CHECK(w.fromOutside("5.6.7.9", 80) == "dropped");
  CHECK(w.fromOutside("192.168.99.55", 80) == "dropped");
  CHECK(w.fromOutside(kNodeIP, 3005) == "dropped");
  CHECK(w.fromPod("192.168.99.55", 80) == "10.180.0.5:80 from 10.0.1.5");
  CHECK(w.fromPod(kNodeIP, 3005) == "10.180.0.5:80 from 10.0.1.5");
  CHECK(w.fromNode("5.6.7.9", 80) == "10.180.0.5:80 from 192.168.0.2");
  CHECK(w.fromPod("172.30.0.45", 80) == "10.180.0.5:80 from 10.0.1.5");
}

TEST_CASE("behaviour: externalTrafficPolicy Local pod short-circuit follows the local-traffic detector") {
  World w;
  lb(w, "svc2", "172.30.0.42", 3002, "", "5.6.7.8", "Local");
  remoteAndLocal(w, "svc2");
  services::parseDetectLocal("BridgeInterface", "cni0", "", w.cfg);
  CHECK(w.fromPod("5.6.7.8", 80, api::Protocol::TCP, "10.0.1.5", "cni0") ==
        "10.180.0.1:80 1/2 from 10.0.1.5; 10.180.2.1:80 1/2 from 10.0.1.5");
  CHECK(w.fromPod("5.6.7.8", 80, api::Protocol::TCP, "10.0.1.5", "veth1") == "10.180.2.1:80 from 10.0.1.5");
  // NodeCIDR without a Node object: no detector, so pods are treated as outside clients.
  services::parseDetectLocal("NodeCIDR", "", "", w.cfg);
  w.st.setNode(nullptr);
  CHECK(w.fromPod("5.6.7.8", 80) == "10.180.2.1:80 from 10.0.1.5");
}

TEST_CASE("behaviour: a service without endpoints refuses on every destination") {
  World w;
  lb(w, "svc4", "172.30.0.44", 3004, "192.168.99.44", "1.2.3.44");
  for (std::pair<const char*, uint16_t> dest :
       {std::pair<const char*, uint16_t>{"172.30.0.44", 80}, {"192.168.99.44", 80}, {"1.2.3.44", 80}, {kNodeIP, 3004}}) {
    INFO(std::string(dest.first));
    CHECK(w.fromOutside(dest.first, dest.second) == "refused");
    CHECK(w.fromPod(dest.first, dest.second) == "refused");
    CHECK(w.fromNode(dest.first, dest.second) == "refused");
  }
}

TEST_CASE("behaviour: internalTrafficPolicy Local with externalTrafficPolicy Cluster: only the ClusterIP is local") {
  World w;
  lb(w, "svc3", "172.30.0.43", 3003, "", "9.10.11.12", "Cluster", "Local");
  remoteAndLocal(w, "svc3");
  CHECK(w.fromPod("172.30.0.43", 80) == "10.180.2.1:80 from 10.0.1.5");
  CHECK(w.fromOutside("9.10.11.12", 80) == kBothMasq);
  CHECK(w.fromOutside(kNodeIP, 3003) == kBothMasq);
}

TEST_CASE("behaviour: loadBalancerSourceRanges admit listed sources to the LB IP only, and drop the rest") {
  World w;
  auto s = lb(w, "svc6", "172.30.0.46", 3006, "192.168.99.66", "1.2.3.6");
  s->loadBalancerSourceRanges = {"192.168.0.0/24", "203.0.113.0/25"};
  w.st.upsertService(s);
  w.st.upsertSlice(slice("ns1", "svc6-1", "svc6", {epPort("p80", 80)}, {ready("10.180.0.6", "node-b")}));
  CHECK(w.fromOutside("1.2.3.6", 80, api::Protocol::TCP, "203.0.113.7") == "10.180.0.6:80 from 192.168.0.2");
  CHECK(w.fromOutside("1.2.3.6", 80) == "dropped");
  CHECK(w.fromOutside("1.2.3.6", 80, api::Protocol::TCP, "203.0.113.200") == "dropped");
  CHECK(w.fromPod("1.2.3.6", 80) == "dropped");  // pods too
  CHECK(w.fromNode("1.2.3.6", 80) == "10.180.0.6:80 from 192.168.0.2");  // 192.168.0.2 is in a range
  // A range holds a node address, so the VIP itself is an allowed source (a node-local client
  // whose source address selection picked the VIP).
  CHECK(w.send(packet(nft::eval::Entry::Output, "1.2.3.6", "1.2.3.6", 80, api::Protocol::TCP, "")) ==
        "10.180.0.6:80 from 192.168.0.2");
  // NodePorts, external IPs and the ClusterIP are not filtered (upstream's documented behaviour).
  CHECK(w.fromOutside(kNodeIP, 3006) == "10.180.0.6:80 from 192.168.0.2");
  CHECK(w.fromOutside("192.168.99.66", 80) == "10.180.0.6:80 from 192.168.0.2");
  CHECK(w.fromPod("172.30.0.46", 80) == "10.180.0.6:80 from 10.0.1.5");
}

TEST_CASE("behaviour: without a range holding a node address the VIP is not an allowed source; ranges are per family") {
  World w;
  auto s = lb(w, "fw", "172.30.0.46", 0, "", "1.2.3.6");
  s->clusterIPs.push_back("fd00:172:30::46");
  s->loadBalancerIngress.push_back({"2001:db8:5::6", "", ""});
  s->loadBalancerSourceRanges = {"203.0.113.0/25"};
  w.st.upsertService(s);
  w.st.upsertSlice(slice("ns1", "fw-4", "fw", {epPort("p80", 80)}, {ready("10.180.0.6", "node-b")}));
  w.st.upsertSlice(slice("ns1", "fw-6", "fw", {epPort("p80", 80)}, {ready("fd00:10:0:2::6", "node-b")}, "IPv6"));
  CHECK(w.send(packet(nft::eval::Entry::Output, "1.2.3.6", "1.2.3.6", 80, api::Protocol::TCP, "")) == "dropped");
  CHECK(w.fromNode("1.2.3.6", 80) == "dropped");
  CHECK(w.fromOutside("1.2.3.6", 80, api::Protocol::TCP, "203.0.113.9") == "10.180.0.6:80 from 192.168.0.2");
  // No IPv6 range: no IPv6 filtering, as upstream.
  CHECK(w.fromOutside("2001:db8:5::6", 80) == "[fd00:10:0:2::6]:80 from 2001:db8::1");
}

TEST_CASE("behaviour: a contested nodePort and external IP go to the older service; the newer keeps its ClusterIP") {
  World w;
  lb(w, "a", "172.30.0.41", 3001, "192.168.99.11", "");
  w.st.upsertSlice(slice("ns1", "a-1", "a", {epPort("p80", 80)}, {ready("10.180.0.1", "node-b")}));
  auto b = lb(w, "b", "172.30.0.42", 3001, "192.168.99.11", "");
  b->meta.creationTimestamp = "2024-02-01T00:00:00Z";
  w.st.upsertService(b);
  w.st.upsertSlice(slice("ns1", "b-1", "b", {epPort("p80", 80)}, {ready("10.180.0.2", "node-b")}));
  CHECK(w.fromOutside(kNodeIP, 3001) == "10.180.0.1:80 from 192.168.0.2");
  CHECK(w.fromOutside("192.168.99.11", 80) == "10.180.0.1:80 from 192.168.0.2");
  CHECK(w.fromPod("172.30.0.42", 80) == "10.180.0.2:80 from 10.0.1.5");
  // The older one goes: the newer takes the destinations over.
  w.st.deleteService("ns1", "a");
  CHECK(w.fromOutside(kNodeIP, 3001) == "10.180.0.2:80 from 192.168.0.2");
  CHECK(w.fromOutside("192.168.99.11", 80) == "10.180.0.2:80 from 192.168.0.2");
}

TEST_CASE("behaviour: an address that is one service's ClusterIP and another's external IP serves both, by port") {
  World w;
  // a: ClusterIP 172.30.0.41 port 80. b: external IP 172.30.0.41 too, on port 8080 (eTP=Cluster).
  lb(w, "a", "172.30.0.41", 3001, "", "");
  w.st.upsertSlice(slice("ns1", "a-1", "a", {epPort("p80", 80)}, {ready("10.180.0.1", "node-b")}));
  auto b = service("ns1", "b", {"172.30.0.42"}, {port("p8080", 8080)});
  b->externalIPs = {"172.30.0.41"};
  w.st.upsertService(b);
  w.st.upsertSlice(slice("ns1", "b-1", "b", {epPort("p8080", 8080)}, {ready("10.180.0.2", "node-b")}));
  // The ClusterIP's port: a's endpoint, a pod unmasqueraded, the outside masqueraded.
  CHECK(w.fromPod("172.30.0.41", 80) == "10.180.0.1:80 from 10.0.1.5");
  CHECK(w.fromOutside("172.30.0.41", 80) == "10.180.0.1:80 from 192.168.0.2");
  // The external IP's port, on the same address: b's endpoint, masqueraded (eTP=Cluster).
  CHECK(w.fromOutside("172.30.0.41", 8080) == "10.180.0.2:8080 from 192.168.0.2");
  CHECK(w.fromPod("172.30.0.41", 8080) == "10.180.0.2:8080 from 192.168.0.2");
  CHECK(w.fromPod("172.30.0.41", 81) == "refused");  // a ClusterIP's invalid port, as upstream
}

TEST_CASE("behaviour: IPv6 LoadBalancer with externalTrafficPolicy Local") {
  World w;
  auto s = service("ns1", "v6", {"fd00:172:30::60"}, {npPort("p80", 80, 3060)});
  s->type = "LoadBalancer";
  s->loadBalancerIngress = {{"2001:db8:5::60", "", ""}};
  s->externalTrafficPolicy = "Local";
  w.st.upsertService(s);
  w.st.upsertSlice(slice("ns1", "v6-1", "v6", {epPort("p80", 8080)},
                         {ready("fd00:10:0:2::1", "node-b"), ready("fd00:10:0:1::1", "node-a")}, "IPv6"));
  CHECK(w.fromOutside("2001:db8:5::60", 80) == "[fd00:10:0:1::1]:8080 from 2001:db8:ff::50");
  CHECK(w.fromOutside(kNodeIP6, 3060) == "[fd00:10:0:1::1]:8080 from 2001:db8:ff::50");
  CHECK(w.fromPod("2001:db8:5::60", 80) ==
        "[fd00:10:0:1::1]:8080 1/2 from fd00:10:0:1::5; [fd00:10:0:2::1]:8080 1/2 from fd00:10:0:1::5");
  CHECK(w.fromNode("2001:db8:5::60", 80) ==
        "[fd00:10:0:1::1]:8080 1/2 from 2001:db8::1; [fd00:10:0:2::1]:8080 1/2 from 2001:db8::1");
}

TEST_CASE("behaviour: externalTrafficPolicy Local falls back to this node's terminating endpoints on its own") {
  World w;
  lb(w, "t", "172.30.0.47", 3007, "", "5.6.7.47", "Local");
  // Here: one serving+terminating, one not serving; elsewhere: one ready.
  w.st.upsertSlice(slice("ns1", "t-1", "t", {epPort("p80", 80)},
                         {{"10.180.2.7", false, true, true, "node-a"}, {"10.180.2.8", false, false, true, "node-a"},
                          ready("10.180.0.7", "node-b")}));
  CHECK(w.fromOutside("5.6.7.47", 80) == "10.180.2.7:80 from 198.51.100.50");
  CHECK(w.fromPod("5.6.7.47", 80) == "10.180.0.7:80 from 10.0.1.5");  // the cluster-wide set has a ready one
  // A ready local endpoint appears: the terminating one stops getting new connections.
  w.st.upsertSlice(slice("ns1", "t-1", "t", {epPort("p80", 80)},
                         {{"10.180.2.7", false, true, true, "node-a"}, ready("10.180.2.9", "node-a"), ready("10.180.0.7", "node-b")}));
  CHECK(w.fromOutside("5.6.7.47", 80) == "10.180.2.9:80 from 198.51.100.50");
}

TEST_CASE("behaviour: several ports of one LoadBalancer go to their own target ports; an eTP=Local service without endpoints refuses") {
  World w;
  auto s = service("ns1", "multi", {"172.30.0.48"}, {npPort("http", 80, 3080), npPort("https", 443, 3443)});
  s->type = "LoadBalancer";
  s->loadBalancerIngress = {{"5.6.7.48", "", ""}};
  s->externalTrafficPolicy = "Local";
  w.st.upsertService(s);
  CHECK(w.fromOutside("5.6.7.48", 80) == "refused");
  CHECK(w.fromOutside(kNodeIP, 3443) == "refused");
  w.st.upsertSlice(slice("ns1", "multi-1", "multi", {epPort("http", 8080), epPort("https", 8443)}, {ready("10.180.2.48", "node-a")}));
  CHECK(w.fromOutside("5.6.7.48", 80) == "10.180.2.48:8080 from 198.51.100.50");
  CHECK(w.fromOutside("5.6.7.48", 443) == "10.180.2.48:8443 from 198.51.100.50");
  CHECK(w.fromOutside(kNodeIP, 3080) == "10.180.2.48:8080 from 198.51.100.50");
  CHECK(w.fromOutside(kNodeIP, 3443) == "10.180.2.48:8443 from 198.51.100.50");
  CHECK(w.fromOutside("5.6.7.48", 8080) == "untouched");
}
