// External traffic: decoding of the external fields and ServiceCIDRs, the NodePort address
// choice, contested destinations, the rules a service gets per traffic policy, incremental ==
// from-scratch with all of it, and the health-check node port function.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "nft/diff.h"
#include "nft/fake.h"
#include "pkg/api/decode.h"
#include "pkg/health/health_check_index.h"
#include "pkg/render/render.h"
#include "pkg/services/claims.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/environment.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

services::NodeConfig cfgA() {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  cfg.clusterCidrV4 = net::parseCidr("10.0.0.0/8");
  cfg.clusterCidrV6 = net::parseCidr("fd00:10::/48");
  return cfg;
}

std::shared_ptr<api::Node> nodeA() {
  auto n = std::make_shared<api::Node>();
  n->meta.name = "node-a";
  n->podCIDRs = {"10.0.1.0/24", "fd00:10:0:1::/64"};
  n->addresses = {{"Hostname", "node-a"}, {"InternalIP", "192.168.0.2"}, {"InternalIP", "192.168.0.3"},
                  {"ExternalIP", "2001:db8::1"}};
  return n;
}

net::HostAddresses hostA() {
  net::HostAddresses h;
  h.addresses = {{"lo", "127.0.0.1", net::Family::V4},   {"lo", "::1", net::Family::V6},
                 {"eth0", "192.168.0.2", net::Family::V4}, {"eth0", "192.168.0.9", net::Family::V4},
                 {"eth1", "192.168.1.2", net::Family::V4}, {"eth0", "2001:db8::1", net::Family::V6}};
  h.defaultRouteInterface[0] = "eth0";
  h.defaultRouteInterface[1] = "eth0";
  return h;
}

api::ServicePort npPort(const std::string& name, int32_t p, int32_t np, api::Protocol proto = api::Protocol::TCP) {
  auto sp = port(name, p, proto);
  sp.nodePort = np;
  return sp;
}

// upstream's svc1 shape: LoadBalancer with a nodePort, an external IP and an LB IP.
std::shared_ptr<api::Service> lbService(const std::string& name, const std::string& ip, int32_t np,
                                        const std::string& etp = "Cluster", const std::string& itp = "Cluster") {
  auto s = service("ns1", name, {ip}, {npPort("p80", 80, np)});
  s->type = "LoadBalancer";
  s->externalIPs = {"192.168.99.11"};
  s->loadBalancerIngress = {{"1.2.3.4", "", ""}};
  s->externalTrafficPolicy = etp;
  s->internalTrafficPolicy = itp;
  s->meta.creationTimestamp = "2024-01-01T00:00:00Z";
  return s;
}

// Endpoints 10.180.0.1 (remote) and 10.180.2.1 (local).
std::shared_ptr<api::EndpointSlice> remoteAndLocal(const std::string& svc) {
  return slice("ns1", svc + "-1", svc, {epPort("p80", 80)},
               {{"10.180.0.1", true, true, false, "node-b"}, {"10.180.2.1", true, true, false, "node-a"}});
}

std::string text(const state::ClusterState& st, const services::NodeConfig& cfg, const net::HostAddresses& h = {}) {
  render::Renderer r(cfg);
  r.setHostAddresses(h);
  return nft::planReconcile({}, r.render(st, nullptr)).txn.toText();
}

bool has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

api::DecodedObjects decode(const std::string& yaml) {
  api::DecodedObjects out;
  std::string err;
  REQUIRE_MESSAGE(api::decodeManifest(yaml, false, out, &err), err);
  return out;
}

}  // namespace

// ---- decoding ----

TEST_CASE("a bad nodePort, external IP, source range or hostname-only ingress drops only that part") {
  auto out = decode(R"(
apiVersion: v1
kind: Service
metadata: {name: web, namespace: prod}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.10
  ports:
  - {name: a, port: 80, nodePort: 70000}
  - {name: b, port: 81, nodePort: 30081}
  externalIPs: [192.0.2.7, 192.0.2.300]
  loadBalancerSourceRanges: [" 203.0.113.0/25", bogus, 10.1.2.3/8]
  healthCheckNodePort: 99999
status:
  loadBalancer:
    ingress: [{ip: 198.51.100.1, ipMode: Proxy}, {hostname: lb.example.com}, {ip: 1.2.3.999}]
)");
  REQUIRE(out.errors.empty());
  REQUIRE(out.services.size() == 1);
  const api::Service& s = out.services[0];
  CHECK(s.ports[0].nodePort == 0);
  CHECK(s.ports[1].nodePort == 30081);
  CHECK(s.externalIPs == std::vector<std::string>{"192.0.2.7"});
  CHECK(s.loadBalancerSourceRanges == std::vector<std::string>{"203.0.113.0/25", "10.0.0.0/8"});
  CHECK(s.sourceRangeUnreadable);  // "bogus" closes the firewall instead of being forgotten
  CHECK(s.healthCheckNodePort == 0);
  REQUIRE(s.loadBalancerIngress.size() == 2);
  CHECK(s.loadBalancerIngress[0].ipMode == "Proxy");
  CHECK(s.loadBalancerIngress[1].hostname == "lb.example.com");
  std::string all;
  for (const auto& w : out.warnings) all += w + "\n";
  CHECK(has(all, "Service prod/web: spec.ports[0].nodePort 70000 out of range (0..65535); nodePort dropped"));
  CHECK(has(all, "spec.externalIPs[1] \"192.0.2.300\" is not an IP address; external IP dropped"));
  CHECK(has(all, "spec.loadBalancerSourceRanges[1] \"bogus\" is not a CIDR (address/prefix-length); the load balancer admits no source until it is fixed"));
  CHECK(has(all, "healthCheckNodePort 99999 out of range"));
  CHECK(has(all, "status.loadBalancer.ingress[1] has no ip (only hostname \"lb.example.com\"); not programmed"));
  CHECK(has(all, "status.loadBalancer.ingress[2].ip \"1.2.3.999\" is not an IP address; ingress entry dropped"));
  CHECK(out.warnings.size() == 6);
}

// Defect 2 of issue 11: objects from before Kubernetes 1.20 may hold IPv4 octets with leading
// zeros; upstream reads them as decimal (netutils.ParseIPSloppy / ParseCIDRSloppy).
TEST_CASE("IPv4 with leading zeros reads as decimal octets everywhere, as upstream's ParseIPSloppy") {
  CHECK(net::canonicalIp("10.96.0.031") == std::optional<std::string>("10.96.0.31"));
  CHECK(net::canonicalIp("010.096.000.031") == std::optional<std::string>("10.96.0.31"));
  CHECK(net::canonicalIp("0255.0.0.1") == std::optional<std::string>("255.0.0.1"));
  for (const char* bad : {"10.96.0.256", "10.96.0", "10.96.0.1.2", "10..0.1", "10.96.0.1 ", "", "a.b.c.d", "10.96.0.-1"}) {
    CAPTURE(bad);
    CHECK_FALSE(net::canonicalIp(bad).has_value());
    CHECK_FALSE(net::parseCidr(std::string(bad) + "/8").has_value());
  }
  auto cidr = net::parseCidr("010.0.0.0/8");
  REQUIRE(cidr.has_value());
  CHECK(cidr->str() == "10.0.0.0/8");
  CHECK(net::canonicalIp("fd00::031") == std::optional<std::string>("fd00::31"));

  auto out = decode(R"(
kind: Service
metadata: {name: legacy, namespace: prod}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.031
  ports: [{port: 80}]
  externalIPs: [192.0.2.07]
  loadBalancerSourceRanges: [010.0.0.0/8]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: legacy-1, namespace: prod, labels: {kubernetes.io/service-name: legacy}}
addressType: IPv4
endpoints: [{addresses: [10.244.0.010]}]
)");
  CHECK(out.errors.empty());
  CHECK(out.warnings.empty());
  REQUIRE(out.services.size() == 1);
  CHECK(out.services[0].clusterIPs == std::vector<std::string>{"10.96.0.31"});
  CHECK(out.services[0].externalIPs == std::vector<std::string>{"192.0.2.7"});
  CHECK(out.services[0].loadBalancerSourceRanges == std::vector<std::string>{"10.0.0.0/8"});
  CHECK_FALSE(out.services[0].sourceRangeUnreadable);
  REQUIRE(out.slices.size() == 1);
  CHECK(out.slices[0].endpoints.at(0).addresses() == std::vector<std::string>{"10.244.0.10"});
}

TEST_CASE("an unreadable loadBalancerSourceRanges entry closes the firewall in every family, valid ranges beside it included") {
  auto out = decode(R"(
kind: Service
metadata: {name: fw, namespace: ns1}
spec:
  type: LoadBalancer
  clusterIPs: [172.30.0.46, "fd00:172:30::46"]
  ports: [{name: p80, port: 80}]
  loadBalancerSourceRanges: [10.0.0.0/33, 203.0.113.0/25, "2001:db8:ff::/120"]
status: {loadBalancer: {ingress: [{ip: 1.2.3.6}, {ip: "2001:db8:5::6"}]}}
)");
  REQUIRE(out.services.size() == 1);
  CHECK(out.services[0].loadBalancerSourceRanges == std::vector<std::string>{"203.0.113.0/25", "2001:db8:ff::/120"});
  CHECK(out.services[0].sourceRangeUnreadable);
  REQUIRE(out.warnings.size() == 1);
  CHECK(has(out.warnings[0], "Service ns1/fw: spec.loadBalancerSourceRanges[0] \"10.0.0.0/33\" is not a CIDR"));
  state::ClusterState st;
  st.setNode(nodeA());
  st.upsertService(std::make_shared<api::Service>(out.services[0]));
  st.upsertSlice(slice("ns1", "fw-1", "fw", {epPort("p80", 80)}, {{"10.180.0.6", true, true, false, "node-b"}}));
  std::string t = text(st, cfgA(), hostA());
  // Each LB IP is firewalled, and no source is allowed: the valid ranges beside the bad one too.
  CHECK(has(t, "firewall-ips { 1.2.3.6 . tcp . 80 comment \"ns1/fw:p80\" }"));
  CHECK(has(t, "firewall-ips { 2001:db8:5::6 . tcp . 80 comment \"ns1/fw:p80\" }"));
  CHECK_FALSE(has(t, "add element ip kube-proxy firewall-allow"));
  CHECK_FALSE(has(t, "add element ip6 kube-proxy firewall-allow"));
}

TEST_CASE("source ranges: one element per allowed range and destination, nested ranges folded into the widest") {
  state::ClusterState st;
  st.setNode(nodeA());
  auto s = lbService("fw", "172.30.0.46", 3006);  // LB IP 1.2.3.4
  s->ports.push_back(npPort("p443", 443, 3007));
  // 10.1.0.0/16 and 10.1.2.3 lie in 10.0.0.0/8: the kernel would refuse them beside it. A range
  // holds the node's address (192.168.0.2), so the LB IP is a source, unless a range holds it.
  s->loadBalancerSourceRanges = {"10.1.0.0/16", "10.0.0.0/8", "10.1.2.3/32", "192.168.0.0/24", "1.2.3.0/28"};
  st.upsertService(s);
  st.upsertSlice(slice("ns1", "fw-1", "fw", {epPort("p80", 80), epPort("p443", 443)}, {{"10.180.0.6", true, true, false, "node-b"}}));
  std::string t = text(st, cfgA(), hostA());
  for (const char* port : {"80", "443"}) {
    CAPTURE(port);
    const std::string dest = std::string("1.2.3.4 . tcp . ") + port + " . ";
    CHECK(has(t, "firewall-allow { " + dest + "10.0.0.0/8 "));
    CHECK(has(t, "firewall-allow { " + dest + "192.168.0.0/24 "));
    CHECK(has(t, "firewall-allow { " + dest + "1.2.3.0/28 "));
    CHECK_FALSE(has(t, "firewall-allow { " + dest + "10.1."));
    CHECK_FALSE(has(t, "firewall-allow { " + dest + "1.2.3.4 "));
  }
  size_t n = 0;
  for (size_t at = t.find("add element ip kube-proxy firewall-allow"); at != std::string::npos;
       at = t.find("add element ip kube-proxy firewall-allow", at + 1))
    ++n;
  CHECK(n == 6);
  // Without 1.2.3.0/28, the LB IP itself is an allowed source (the node's range admits the node).
  s->loadBalancerSourceRanges = {"192.168.0.0/24"};
  st.upsertService(s);
  CHECK(has(text(st, cfgA(), hostA()), "firewall-allow { 1.2.3.4 . tcp . 80 . 1.2.3.4 comment"));
}

TEST_CASE("ServiceCIDR objects decode (v1 and v1beta1), cluster-scoped, a bad CIDR dropped alone") {
  auto out = decode(R"(
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: kubernetes}
spec: {cidrs: [10.96.0.0/12, "fd00:10:96::/112"]}
---
apiVersion: networking.k8s.io/v1beta1
kind: ServiceCIDR
metadata: {name: extra}
spec: {cidrs: [10.200.1.7/16, nope]}
---
apiVersion: networking.k8s.io/v2
kind: ServiceCIDR
metadata: {name: future}
)");
  REQUIRE(out.serviceCIDRs.size() == 2);
  CHECK(out.serviceCIDRs[0].meta.name == "kubernetes");
  CHECK(out.serviceCIDRs[0].meta.ns.empty());
  CHECK(out.serviceCIDRs[0].cidrs == std::vector<std::string>{"10.96.0.0/12", "fd00:10:96::/112"});
  CHECK(out.serviceCIDRs[1].cidrs == std::vector<std::string>{"10.200.0.0/16"});
  REQUIRE(out.warnings.size() == 1);
  CHECK(has(out.warnings[0], "ServiceCIDR extra: spec.cidrs[1] \"nope\" is not a CIDR"));
  REQUIRE(out.errors.size() == 1);
  CHECK(has(out.errors[0], "ServiceCIDR future: apiVersion \"networking.k8s.io/v2\" is not supported"));
}

TEST_CASE("the store reports ServiceCIDR changes only when the value changed") {
  state::ClusterState st;
  auto sc = std::make_shared<api::ServiceCIDR>();
  sc->meta.name = "kubernetes";
  sc->cidrs = {"10.96.0.0/16"};
  st.upsertServiceCIDR(sc);
  CHECK(st.serviceCIDRsChanged);
  st.serviceCIDRsChanged = false;
  st.upsertServiceCIDR(std::make_shared<api::ServiceCIDR>(*sc));
  CHECK_FALSE(st.serviceCIDRsChanged);
  st.deleteServiceCIDR("kubernetes");
  CHECK(st.serviceCIDRsChanged);
  CHECK(st.serviceCIDRs.empty());
}

// ---- flags and the NodePort addresses ----

TEST_CASE("--nodeport-addresses: primary by default, CIDRs, upstream 1.37's keywords, primary beside them") {
  services::NodeConfig cfg;
  services::applyNodePortAddresses({}, cfg);
  CHECK(cfg.nodePortPrimary);
  CHECK_FALSE(cfg.localhostNodePortsV4);
  services::applyNodePortAddresses({"primary"}, cfg);
  CHECK(cfg.nodePortPrimary);
  CHECK(cfg.nodePortCidrs.empty());
  services::applyNodePortAddresses({"192.168.0.0/24", "2001:db8::/64"}, cfg);
  CHECK_FALSE(cfg.nodePortPrimary);
  CHECK(cfg.nodePortCidrs.size() == 2);
  services::applyNodePortAddresses({"primary", "localhost"}, cfg);
  CHECK(cfg.nodePortPrimary);
  REQUIRE(cfg.nodePortCidrs.size() == 2);
  CHECK(cfg.nodePortCidrs[0].str() == "127.0.0.0/8");
  CHECK(cfg.nodePortCidrs[1].str() == "::1/128");
  CHECK((cfg.localhostNodePortsV4 && cfg.localhostNodePortsV6));
  services::applyNodePortAddresses({"all"}, cfg);
  CHECK(cfg.nodePortCidrs.size() == 2);
  CHECK_FALSE(cfg.nodePortPrimary);
  CHECK_FALSE(cfg.localhostNodePortsV4);  // a /0 holds loopback by accident, not by choice
  CHECK_FALSE(cfg.localhostNodePortsV6);
  services::applyNodePortAddresses({"0.0.0.0/0", "127.0.0.1/32"}, cfg);
  CHECK(cfg.localhostNodePortsV4);
  CHECK_FALSE(cfg.localhostNodePortsV6);
  services::applyNodePortAddresses({"::1/128"}, cfg);
  CHECK_FALSE(cfg.localhostNodePortsV4);
  CHECK(cfg.localhostNodePortsV6);
  services::applyNodePortAddresses({"127.0.0.2/32"}, cfg);  // not the address the listeners bind
  CHECK_FALSE(cfg.localhostNodePortsV4);
  for (const char* ok : {"primary", "localhost", "all", "10.0.0.0/8", "::1/128"})
    CHECK(services::isNodePortAddressEntry(ok));
  for (const char* bad : {"", "bogus", "Localhost", "10.0.0.0/33", " primary"})
    CHECK_FALSE(services::isNodePortAddressEntry(bad));
}

TEST_CASE("--detect-local-mode needs its interface flag, and rejects unknown modes") {
  services::NodeConfig cfg;
  CHECK_FALSE(services::parseDetectLocal("", "", "", cfg));
  CHECK(cfg.detectLocal == services::LocalDetectMode::ClusterCIDR);
  CHECK(services::parseDetectLocal("BridgeInterface", "", "", cfg));
  CHECK_FALSE(services::parseDetectLocal("BridgeInterface", "cni0", "", cfg));
  CHECK(cfg.podBridgeInterface == "cni0");
  CHECK(services::parseDetectLocal("InterfaceNamePrefix", "", "bad\"name", cfg));
  CHECK_FALSE(services::parseDetectLocal("InterfaceNamePrefix", "", "veth", cfg));
  CHECK(services::parseDetectLocal("LocalCIDR", "", "", cfg));
}

TEST_CASE("NodePort addresses: primary is the Node's first InternalIP per family (ExternalIP as fallback)") {
  services::NodeConfig cfg = cfgA();
  auto env = services::deriveEnvironment(cfg, nodeA().get(), {}, hostA());
  CHECK(env.family[0].nodePortIPs == std::vector<std::string>{"192.168.0.2"});
  CHECK(env.family[1].nodePortIPs == std::vector<std::string>{"2001:db8::1"});
  CHECK(env.family[0].nodeIPs == std::vector<std::string>{"192.168.0.2"});
  CHECK(env.warnings.empty());
}

TEST_CASE("NodePort addresses without a Node object: the default route's interface, with a warning") {
  services::NodeConfig cfg = cfgA();
  auto env = services::deriveEnvironment(cfg, nullptr, {}, hostA());
  CHECK(env.family[0].nodePortIPs == std::vector<std::string>{"192.168.0.2", "192.168.0.9"});
  CHECK(env.family[1].nodePortIPs == std::vector<std::string>{"2001:db8::1"});
  REQUIRE(env.warnings.size() == 2);
  CHECK(has(env.warnings[0], "no Node object for node-a: using the IPv4 addresses of eth0 (default route)"));
}

TEST_CASE("NodePort addresses from CIDRs: matching local addresses, never loopback; /0 matches all") {
  services::NodeConfig cfg = cfgA();
  services::applyNodePortAddresses({"192.168.0.0/24", "192.168.1.0/24", "127.0.0.0/8", "2001:db8::/64"}, cfg);
  auto env = services::deriveEnvironment(cfg, nodeA().get(), {}, hostA());
  CHECK(env.family[0].nodePortIPs == std::vector<std::string>{"192.168.0.2", "192.168.0.9", "192.168.1.2"});
  CHECK(env.family[1].nodePortIPs == std::vector<std::string>{"2001:db8::1"});
  CHECK_FALSE(env.family[0].nodePortMatchAll);
  CHECK(env.warnings.empty());  // 127.0.0.1 is served, by the listeners (localhost_nodeports.h)
  CHECK(cfg.localhostNodePortsV4);

  // A CIDR that selects a loopback alias but not 127.0.0.1: said so, and not served.
  net::HostAddresses host = hostA();
  host.addresses.push_back({"lo", "127.0.0.2", net::Family::V4});
  services::applyNodePortAddresses({"primary", "127.0.0.2/32"}, cfg);
  env = services::deriveEnvironment(cfg, nodeA().get(), {}, host);
  CHECK(env.family[0].nodePortIPs == std::vector<std::string>{"192.168.0.2"});
  REQUIRE(env.warnings.size() == 1);
  CHECK(has(env.warnings[0], "loopback address 127.0.0.2 but not 127.0.0.1"));

  services::applyNodePortAddresses({"0.0.0.0/0"}, cfg);
  env = services::deriveEnvironment(cfg, nodeA().get(), {}, hostA());
  CHECK(env.family[0].nodePortMatchAll);
  CHECK_FALSE(env.family[1].nodePortMatchAll);
  CHECK(env.family[1].nodePortIPs.empty());
}

TEST_CASE("--detect-local-mode=NodeCIDR without a Node object: no detector, and a warning") {
  services::NodeConfig cfg = cfgA();
  services::parseDetectLocal("NodeCIDR", "", "", cfg);
  auto env = services::deriveEnvironment(cfg, nullptr, {}, {});
  CHECK(env.family[0].localKind.empty());
  CHECK(has(env.warnings[0], "--detect-local-mode=NodeCIDR: no Node object"));
}

// ---- contested destinations ----

TEST_CASE("claims: the older service keeps a destination; deleting it hands the destination over") {
  services::DestinationClaims c;
  auto a = lbService("a", "172.30.0.41", 3001);
  auto b = lbService("b", "172.30.0.42", 3001);
  b->meta.creationTimestamp = "2024-02-01T00:00:00Z";  // newer
  std::set<std::string> affected;
  c.update("ns1/b", b.get(), &affected);
  CHECK(affected.empty());
  c.update("ns1/a", a.get(), &affected);
  CHECK(affected == std::set<std::string>{"ns1/b"});  // b lost nodePort 3001 and the external IP
  CHECK(c.owner(services::nodePortDestination(api::Protocol::TCP, 3001)) == "ns1/a");
  CHECK(c.owns("ns1/b", services::ipDestination("172.30.0.42", api::Protocol::TCP, 80)));
  CHECK_FALSE(c.owns("ns1/b", services::ipDestination("192.168.99.11", api::Protocol::TCP, 80)));
  CHECK(c.owns("ns1/a", services::nodePortDestination(api::Protocol::UDP, 3001)));  // unclaimed
  affected.clear();
  c.update("ns1/a", nullptr, &affected);
  CHECK(affected == std::set<std::string>{"ns1/b"});
  CHECK(c.owner(services::nodePortDestination(api::Protocol::TCP, 3001)) == "ns1/b");
  // Same timestamp: namespace/name decides; no timestamp counts as newest.
  auto x = lbService("x", "172.30.0.43", 3005), y = lbService("y", "172.30.0.44", 3005);
  y->meta.creationTimestamp = x->meta.creationTimestamp;
  c.update("ns1/y", y.get(), nullptr);
  c.update("ns1/x", x.get(), nullptr);
  CHECK(c.owner(services::nodePortDestination(api::Protocol::TCP, 3005)) == "ns1/x");
  x->meta.creationTimestamp.clear();
  c.update("ns1/x", x.get(), nullptr);
  CHECK(c.owner(services::nodePortDestination(api::Protocol::TCP, 3005)) == "ns1/y");
}

TEST_CASE("claims: a moved claims object keeps working (its entries point at each other), the source is left empty") {
  auto a = lbService("a", "172.30.0.41", 3001);
  auto b = lbService("b", "172.30.0.42", 3001);
  b->meta.creationTimestamp = "2024-02-01T00:00:00Z";  // newer
  const std::string nodePort = services::nodePortDestination(api::Protocol::TCP, 3001);
  services::DestinationClaims from;
  from.update("ns1/a", a.get(), nullptr);
  from.update("ns1/b", b.get(), nullptr);
  const services::DestinationClaims copy = from;

  services::DestinationClaims moved(std::move(from));
  CHECK(moved == copy);
  CHECK(from.owner(nodePort).empty());  // NOLINT(bugprone-use-after-move): moved, not copied
  // Updates through the moved object reach the entries it took over: a leaving hands over.
  std::set<std::string> affected;
  moved.update("ns1/a", nullptr, &affected);
  CHECK(affected == std::set<std::string>{"ns1/b"});
  CHECK(moved.owner(nodePort) == "ns1/b");

  services::DestinationClaims assigned;
  assigned.update("ns1/c", lbService("c", "172.30.0.43", 3003).get(), nullptr);  // replaced by the move
  assigned = std::move(moved);
  CHECK(moved.owner(nodePort).empty());  // NOLINT(bugprone-use-after-move)
  CHECK(assigned.owner(services::nodePortDestination(api::Protocol::TCP, 3003)).empty());
  affected.clear();
  assigned.update("ns1/a", a.get(), &affected);  // a comes back: older, it wins again
  CHECK(affected == std::set<std::string>{"ns1/b"});
  CHECK(assigned == copy);
  // The source is usable again after the move.
  from.update("ns1/b", b.get(), nullptr);
  CHECK(from.owner(nodePort) == "ns1/b");
}

TEST_CASE("golden: external services render to exactly unit/golden/external-services.nft") {
  // Upstream's test world: svc1 eTP=Cluster, svc2 eTP=Local, svc3 iTP=Local, svc4 without
  // endpoints, svc5 eTP=Local without local endpoints, svc6 with source ranges and an ipMode Proxy
  // ingress; the Node 192.168.0.2; a ServiceCIDR.
  state::ClusterState st;
  st.setNode(nodeA());
  auto sc = std::make_shared<api::ServiceCIDR>();
  sc->meta.name = "kubernetes";
  sc->cidrs = {"172.30.0.0/16"};
  st.upsertServiceCIDR(sc);
  st.upsertService(lbService("svc1", "172.30.0.41", 3001));
  st.upsertSlice(remoteAndLocal("svc1"));
  auto svc2 = lbService("svc2", "172.30.0.42", 3002, "Local");
  svc2->externalIPs = {"192.168.99.22"};
  svc2->loadBalancerIngress = {{"5.6.7.8", "", "VIP"}};
  svc2->healthCheckNodePort = 30000;
  st.upsertService(svc2);
  st.upsertSlice(remoteAndLocal("svc2"));
  auto svc3 = lbService("svc3", "172.30.0.43", 3003, "Cluster", "Local");
  svc3->externalIPs.clear();
  svc3->loadBalancerIngress = {{"9.10.11.12", "", ""}};
  st.upsertService(svc3);
  st.upsertSlice(remoteAndLocal("svc3"));
  auto svc4 = lbService("svc4", "172.30.0.44", 3004);
  svc4->externalIPs.clear();
  svc4->loadBalancerIngress.clear();
  st.upsertService(svc4);
  auto svc5 = lbService("svc5", "172.30.0.45", 3005, "Local");
  svc5->externalIPs = {"192.168.99.55"};
  svc5->loadBalancerIngress.clear();
  st.upsertService(svc5);
  st.upsertSlice(slice("ns1", "svc5-1", "svc5", {epPort("p80", 80)}, {{"10.180.0.5", true, true, false, "node-b"}}));
  auto svc6 = lbService("svc6", "172.30.0.46", 0);
  svc6->externalIPs.clear();
  svc6->loadBalancerIngress = {{"1.2.3.6", "", ""}, {"1.2.3.7", "", "Proxy"}};
  svc6->loadBalancerSourceRanges = {"192.168.0.0/24", "203.0.113.0/25"};
  st.upsertService(svc6);
  st.upsertSlice(slice("ns1", "svc6-1", "svc6", {epPort("p80", 80)}, {{"10.180.0.6", true, true, false, "node-b"}}));

  std::string t = text(st, cfgA(), hostA());
  checkGolden("unit/golden/external-services.nft", t);
  // What each path does is asserted as behaviour in unit/behaviour_external_test.cc.

  // No chain per service on the common path: base chains, the shared pick chains, and a
  // firewall chain for the one service with source ranges; a destination is its slots.
  {
    std::istringstream lines(t);
    std::set<std::string> chains;
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("add chain ip kube-proxy ", 0) == 0) chains.insert(line.substr(24, line.find(' ', 24) - 24));
    for (const std::string& c : chains) {
      INFO(c);
      CHECK((c.rfind("pick", 0) == 0 || c.rfind("nodeport-pick", 0) == 0 || c == "firewall-ns1/svc6" ||
             c.find('/') == std::string::npos));
    }
    CHECK(chains.count("pick-tcp"));
    CHECK(chains.count("pick-local-tcp"));
    CHECK(chains.count("nodeport-pick-local-tcp"));
    CHECK(has(t, "add element ip kube-proxy local-backends-tcp { 5.6.7.8 . 80 . 0 comment \"ns1/svc2:p80\" : "));
    CHECK(has(t, "add element ip kube-proxy local-service-ips { 5.6.7.8 . tcp . 80 comment \"ns1/svc2:p80\" : continue }"));
  }
}

TEST_CASE("terminating endpoints: the local set falls back on its own") {
  auto sp = port("p80", 80);
  // (b) of upstream's test: local .2,.3 serving+terminating, local .4 not serving, remote .5 ready.
  auto s = slice("ns1", "s", "svc", {epPort("p80", 80)},
                 {{"10.0.1.2", false, true, true, "node-a"}, {"10.0.1.3", false, true, true, "node-a"},
                  {"10.0.1.4", false, false, true, "node-a"}, {"10.0.1.5", true, true, false, "node-b"}});
  auto sets = services::categorizeEndpoints(sp, {s.get()}, "IPv4", "node-a");
  REQUIRE(sets.cluster.size() == 1);
  CHECK(sets.cluster[0].ip == "10.0.1.5");
  REQUIRE(sets.local.size() == 2);
  CHECK(sets.local[0].ip == "10.0.1.2");
  CHECK(sets.local[1].ip == "10.0.1.3");
}

// ---- incremental == from scratch, and what a change costs ----

TEST_CASE("incremental renders equal from-scratch ones through policy changes, conflicts and endpoint moves") {
  state::ClusterState st;
  st.setNode(nodeA());
  for (int i = 0; i < 12; ++i) {
    std::string name = "svc" + std::to_string(i);
    auto s = lbService(name, "172.30.1." + std::to_string(i), 3000 + i % 6, i % 3 == 1 ? "Local" : "Cluster",
                       i % 3 == 2 ? "Local" : "Cluster");
    s->clusterIPs.push_back("fd00:172:30::1:" + std::to_string(i));
    s->meta.creationTimestamp = "2024-01-01T00:00:" + std::to_string(10 + i) + "Z";
    s->loadBalancerSourceRanges = i % 4 == 0 ? std::vector<std::string>{"192.168.0.0/16"} : std::vector<std::string>{};
    st.upsertService(s);
    std::vector<Ep> eps;
    for (int e = 0; e <= i % 4; ++e)
      eps.push_back({"10.180." + std::to_string(i) + "." + std::to_string(e), true, true, false, e % 2 ? "node-a" : "node-b"});
    st.upsertSlice(slice("ns1", name + "-1", name, {epPort("p80", 80)}, eps));
  }
  render::Renderer inc(cfgA());
  inc.setHostAddresses(hostA());
  inc.render(st, nullptr);
  st.changedServices.clear();

  for (int step = 0; step < 6; ++step) {
    render::BackendOrders before = inc.slots();
    std::string a = "svc" + std::to_string(step), b = "svc" + std::to_string(step + 6);
    // Move endpoints between nodes (local sets change), flip a policy, delete an older claimant.
    std::vector<Ep> eps;
    for (int e = 0; e < 3 + step; ++e)
      eps.push_back({"10.181." + std::to_string(step) + "." + std::to_string(e), e != 1, true, e == 1, e % 2 ? "node-b" : "node-a"});
    st.upsertSlice(slice("ns1", a + "-1", a, {epPort("p80", 80)}, eps));
    auto flipped = std::make_shared<api::Service>(*st.services.at("ns1/" + b));
    flipped->externalTrafficPolicy = flipped->externalTrafficPolicy == "Local" ? "Cluster" : "Local";
    st.upsertService(flipped);
    if (step % 2 == 0) st.deleteService("ns1", "svc" + std::to_string(step + 1));  // an older nodePort holder
    auto changed = st.changedServices;
    st.changedServices.clear();
    const nft::Ruleset& r = inc.render(st, &changed);
    REQUIRE(inc.touchedOwners() != nullptr);

    render::Renderer scratch(cfgA());
    scratch.setHostAddresses(hostA());
    scratch.setSlots(before);
    const nft::Ruleset& full = scratch.render(st, nullptr);
    checkSameParts(r, full, step);
    CHECK(scratch.slots() == inc.slots());
  }
}

TEST_CASE("a Node or ServiceCIDR change re-renders the base part alone unless services depend on it") {
  FakePipeline p(cfgA());
  p.renderer.setHostAddresses(hostA());
  state::ClusterState st;
  st.setNode(nodeA());
  st.upsertService(lbService("svc1", "172.30.0.41", 3001, "Local"));
  st.upsertSlice(remoteAndLocal("svc1"));
  p.sync(st);

  // A heartbeat: the Node object changes, nothing rendered does.
  auto beat = std::make_shared<api::Node>(*nodeA());
  beat->meta.resourceVersion = "2";
  st.setNode(beat);
  CHECK(p.sync(st).txn.empty());
  CHECK(p.renderer.touchedOwners()->empty());

  // A ServiceCIDR: the base part only.
  auto sc = std::make_shared<api::ServiceCIDR>();
  sc->meta.name = "kubernetes";
  sc->cidrs = {"172.30.0.0/16"};
  st.upsertServiceCIDR(sc);
  auto plan = p.sync(st);
  CHECK(*p.renderer.touchedOwners() == std::set<std::string>{"base"});
  CHECK(plan.txn.size() == 3);  // flush cluster-ips-check, its two rules
  CHECK(p.kernel.tables["ip kube-proxy"].rules["cluster-ips-check"].size() == 2);

  // Another node IP: the NodePort address (base) and the firewall's node test (services) change.
  auto moved = std::make_shared<api::Node>(*nodeA());
  moved->addresses = {{"InternalIP", "192.168.0.7"}};
  st.setNode(moved);
  p.sync(st);
  CHECK(p.renderer.touchedOwners() == nullptr);  // services see node IPs: rendered from scratch
  CHECK(p.kernel.tables["ip kube-proxy"].sets["nodeport-ips"].elements.count("\"192.168.0.7\"") == 1);
}

// ---- health-check node ports ----

TEST_CASE("health-check node ports: eTP=Local LoadBalancers only, local ready endpoints (TestHealthCheckNodePortWhenTerminating)") {
  services::NodeConfig cfg = cfgA();
  state::ClusterState st;
  auto svc = lbService("hc", "172.30.1.1", 3001, "Local");
  svc->healthCheckNodePort = 30000;
  svc->clusterIPs.push_back("fd00:172:30::1:1");
  st.upsertService(svc);
  auto ready = [](const std::string& ip, const std::string& node) { return Ep{ip, true, true, false, node}; };
  st.upsertSlice(slice("ns1", "hc-v4", "hc", {epPort("p80", 80)},
                       {ready("10.0.1.1", "node-a"), ready("10.0.1.2", "node-a"), ready("10.0.1.3", "node-a"),
                        ready("10.0.1.9", "node-b")}));
  // The IPv6 endpoints of the same pods: counted once, by the primary family.
  st.upsertSlice(slice("ns1", "hc-v6", "hc", {epPort("p80", 80)}, {ready("fd00::1", "node-a")}, "IPv6"));
  auto cluster = lbService("cluster", "172.30.1.2", 3002, "Cluster");
  cluster->healthCheckNodePort = 30001;  // eTP=Cluster: no health check
  st.upsertService(cluster);

  auto hc = health::healthCheckNodePorts(st, cfg);
  REQUIRE(hc.size() == 1);
  CHECK(hc.at(30000) == health::HealthCheckService{"ns1", "hc", 3});

  // All local endpoints terminating: 0 local ready endpoints (the server answers 503).
  st.upsertSlice(slice("ns1", "hc-v4", "hc", {epPort("p80", 80)},
                       {{"10.0.1.1", false, true, true, "node-a"}, {"10.0.1.2", false, true, true, "node-a"},
                        {"10.0.1.3", false, true, true, "node-a"}, ready("10.0.1.9", "node-b")}));
  CHECK(health::healthCheckNodePorts(st, cfg).at(30000).localEndpoints == 0);

  // A slice for another port name does not count; a second service with the same port loses.
  st.upsertSlice(slice("ns1", "hc-v4", "hc", {epPort("other", 80)}, {ready("10.0.1.1", "node-a")}));
  auto dup = lbService("dup", "172.30.1.3", 3003, "Local");
  dup->healthCheckNodePort = 30000;
  dup->meta.creationTimestamp = "2025-01-01T00:00:00Z";
  st.upsertService(dup);
  hc = health::healthCheckNodePorts(st, cfg);
  CHECK(hc.at(30000) == health::HealthCheckService{"ns1", "hc", 0});
  st.deleteService("ns1", "hc");
  CHECK(health::healthCheckNodePorts(st, cfg).at(30000).name == "dup");
}

TEST_CASE("health-check index: kept up from each sync's changes, it equals a from-scratch look and says when it moved") {
  services::NodeConfig cfg = cfgA();
  state::ClusterState st;
  health::HealthCheckIndex index;
  // As the daemon does: the journal of one "sync" at a time; nullptr for the first.
  bool first = true;
  auto step = [&](const char* what) {
    std::set<std::string> changed;
    changed.swap(st.changedServices);
    bool moved = index.update(st, cfg, first ? nullptr : &changed);
    first = false;
    INFO(what);
    CHECK(index.ports() == health::healthCheckNodePorts(st, cfg));
    return moved;
  };
  auto local = [](const std::string& ip) { return Ep{ip, true, true, false, "node-a"}; };
  auto svc = [&](const std::string& name, int32_t hcPort, const std::string& created) {
    auto s = lbService(name, "172.30.2." + std::to_string(hcPort % 200), 3100 + hcPort % 200, "Local");
    s->healthCheckNodePort = hcPort;
    s->meta.creationTimestamp = created;
    return s;
  };
  st.upsertService(svc("a", 30100, "2024-01-01T00:00:00Z"));
  st.upsertSlice(slice("ns1", "a-1", "a", {epPort("p80", 80)}, {local("10.0.2.1")}));
  st.upsertService(lbService("plain", "172.30.2.99", 3199));  // eTP=Cluster: never a port
  CHECK(step("first look"));
  CHECK(index.ports().at(30100).localEndpoints == 1);

  st.upsertService(lbService("plain", "172.30.2.99", 3198));
  CHECK_FALSE(step("a change that no port sees"));

  st.upsertSlice(slice("ns1", "a-1", "a", {epPort("p80", 80)}, {local("10.0.2.1"), local("10.0.2.2")}));
  CHECK(step("a second local endpoint"));
  CHECK(index.ports().at(30100).localEndpoints == 2);

  st.upsertService(svc("young", 30100, "2025-01-01T00:00:00Z"));
  CHECK_FALSE(step("a younger service asks for the same port: it loses"));
  CHECK(index.ports().at(30100).name == "a");

  st.deleteService("ns1", "a");
  CHECK(step("the older one goes: the younger one takes the port"));
  CHECK(index.ports().at(30100).name == "young");

  st.upsertService(svc("young", 30101, "2025-01-01T00:00:00Z"));
  CHECK(step("the port moves"));
  CHECK(index.ports().count(30100) == 0);
  CHECK(index.ports().count(30101) == 1);

  st.deleteService("ns1", "young");
  CHECK(step("gone"));
  CHECK(index.ports().empty());
}

TEST_CASE("restart: the slot orders of every destination are adopted, so an external state reconciles to nothing") {
  FakePipeline p(cfgA());
  p.renderer.setHostAddresses(hostA());
  state::ClusterState st;
  st.setNode(nodeA());
  auto local = [](const std::string& ip) { return Ep{ip, true, true, false, "node-a"}; };
  const Ep remote{"10.180.0.1", true, true, false, "node-b"};
  st.upsertService(lbService("etp", "172.30.0.41", 3001, "Local"));
  st.upsertSlice(slice("ns1", "etp-1", "etp", {epPort("p80", 80)}, {remote, local("10.180.2.1"), local("10.180.2.2"), local("10.180.2.3")}));
  st.upsertService(lbService("itp", "172.30.0.42", 3002, "Cluster", "Local"));
  st.upsertSlice(slice("ns1", "itp-1", "itp", {epPort("p80", 80)}, {local("10.180.0.7"), local("10.180.0.8"), local("10.180.0.9")}));
  p.sync(st);
  // Remove the first endpoints: the last ones move into their slots, so the orders are no longer
  // the sorted ones a fresh render would choose.
  st.upsertSlice(slice("ns1", "etp-1", "etp", {epPort("p80", 80)}, {remote, local("10.180.2.2"), local("10.180.2.3")}));
  st.upsertSlice(slice("ns1", "itp-1", "itp", {epPort("p80", 80)}, {local("10.180.0.8"), local("10.180.0.9")}));
  p.sync(st);
  CHECK(p.kernel.tables["ip kube-proxy"].sets["local-backends-tcp"].elements.at("{\"concat\":[\"1.2.3.4\",80,0]}").first ==
        "{\"concat\":[\"10.180.2.3\",80]}");
  std::vector<nft::ListedTable> listed = p.listBoth();
  render::Renderer fresh(cfgA());
  fresh.setHostAddresses(hostA());
  fresh.adoptSlots(listed);
  auto plan = nft::planReconcile(listed, fresh.render(st, nullptr));
  CHECK(fresh.slots() == p.renderer.slots());
  CHECK_FALSE(plan.needsFull);
  CHECK(plan.txn.empty());
}
