// Trace by name and the real causes (pkg/trace: request, frontends, causes, drift, known_state;
// nft/eval/trace_report's new fields): each cause from a rendered table and the state that made it, as
// `trace` puts them together on a node.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "nft/eval/trace_report.h"
#include "pkg/trace/causes.h"
#include "pkg/trace/drift.h"
#include "pkg/trace/explain.h"
#include "pkg/trace/frontends.h"
#include "pkg/trace/known_state.h"
#include "pkg/trace/request.h"
#include "unit/behaviour.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;
using nft::eval::Entry;

namespace {

Ep ready(const std::string& ip, const std::string& node = "node-a") { return {ip, true, true, false, node}; }

std::optional<trace::Request> parse(std::vector<std::string> args, std::string* err) {
  auto p = trace::parseRequest(args, err);
  return p ? std::optional<trace::Request>(p->request) : std::nullopt;
}

trace::KnownState knownOf(const World& w, uint64_t servicesKnown = 0) {
  trace::KnownState k;
  k.origin = "daemon";
  k.cfg = w.cfg;
  for (const auto& [key, s] : w.st.services) k.state.upsertService(s);
  for (const auto& [key, slices] : w.st.slicesByService)
    for (const auto& [name, s] : slices) k.state.upsertSlice(s);
  k.state.setNode(w.st.node);
  for (const auto& [name, c] : w.st.serviceCIDRs) k.state.upsertServiceCIDR(c);
  k.servicesKnown = servicesKnown ? servicesKnown : w.st.services.size();
  diag::DaemonStatus d;
  d.source.synced = true;
  d.lastSuccess = diag::SyncSuccess{};
  k.daemon = d;
  return k;
}

// The report of one packet through the state's table, with the cause the state gives it.
nft::eval::Report reported(World& w, const nft::eval::Packet& p, const trace::KnownState& k) {
  nft::eval::Report r = nft::eval::makeReport(w.trace(p));
  trace::explainForOurLayout(r);
  trace::CauseContext c;
  c.known = &k;
  c.service = trace::serviceAt(k, p.daddr, p.dport, p.protocol, p.daddr == kNodeIP, &c.addressOnly);
  // As the render environment has it: the Node's zone label.
  if (w.st.node) {
    auto z = w.st.node->meta.labels.find("topology.kubernetes.io/zone");
    if (z != w.st.node->meta.labels.end()) c.zone = z->second;
  }
  r.cause = trace::causeOf(r, c);
  return r;
}

std::string code(const nft::eval::Report& r) { return r.cause ? r.cause->code : ""; }

int64_t count(const nft::eval::Report& r, const std::string& name) {
  for (const auto& [k, v] : r.cause->counts)
    if (k == name) return v;
  FAIL("no count " << name);
  return -1;
}

nft::eval::Packet fromPod(const std::string& to, uint16_t port) {
  return packet(Entry::Prerouting, "10.0.1.5", to, port, api::Protocol::TCP, "veth1");
}

}  // namespace

TEST_CASE("trace request: a Service by --service=NS/NAME[:PORT] or by its DNS name; an address stays an address") {
  std::string err;
  auto r = parse({"--service=shop/cart:http"}, &err);
  REQUIRE(r);
  CHECK((r->service && r->service->ns == "shop" && r->service->name == "cart" && r->service->port == "http"));
  CHECK(r->from == trace::From::Node);  // the default for a Service: the node's own view
  CHECK(r->proto.empty());
  r = parse({"--dst=cart.shop.svc.cluster.local:8080", "--from=pod", "--src=10.0.1.5,fd00::5"}, &err);
  REQUIRE(r);
  CHECK((r->service && r->service->dnsName && r->service->port == "8080" && r->service->ns == "shop"));
  CHECK(r->srcs == std::vector<std::string>{"10.0.1.5", "fd00::5"});
  CHECK(trace::sourceFor(*r, net::Family::V6) == "fd00::5");
  r = parse({"--dst=cart.shop:80"}, &err);
  INFO(err);
  REQUIRE(r);
  CHECK(r->service->name == "cart");
  r = parse({"--from=pod", "--src=fd00::5", "--dst=[fd00::10]:80", "--proto=tcp"}, &err);
  REQUIRE(r);
  CHECK_FALSE(r->service);
  CHECK(r->dst == "fd00::10");

  for (auto bad : std::vector<std::vector<std::string>>{
           {"--dst=cart:80"},                                    // a single label is no Service name
           {"--dst=cart.shop"},                                  // no port
           {"--dst=cart.shop.cluster:80"},                       // the third label must be svc
           {"--dst=Cart.shop:80"},                               // not a DNS-1123 label
           {"--service=cart"},                                   // no namespace
           {"--service=shop/cart:70000"},                        // neither a port nor a port name
           {"--service=shop/cart", "--dst=10.0.0.1:80"},         // two targets
           {"--service=shop/cart", "--from=pod"},                // a pod needs its address
           {"--service=shop/cart", "--from=pod", "--src=10.0.0.1,10.0.0.2"},  // one per family
       }) {
    INFO(bad[0]);
    CHECK_FALSE(parse(bad, &err));
    CHECK(err.rfind("trace: ", 0) == 0);
  }
}

TEST_CASE("frontends: every address of a Service, only what DNS gives for its name, a headless Service's endpoints") {
  auto s = service("shop", "cart", {"172.30.0.10", "fd00::10"}, {port("http", 80), port("dns", 53, api::Protocol::UDP)});
  s->ports[0].nodePort = 30080;
  s->type = "LoadBalancer";
  s->externalIPs = {"192.0.2.7"};
  s->loadBalancerIngress = {{"198.51.100.9", "", "VIP"}};
  trace::ServiceTarget all{"shop", "cart", "", false};
  auto f = trace::serviceFrontends(*s, {}, all, "", {"192.168.0.2"});
  // Only the families of its ClusterIPs: a single-stack Service has no NodePort on an IPv6 address.
  auto single = service("shop", "one", {"172.30.0.11"}, {port("http", 80)});
  single->type = "NodePort";
  single->ports[0].nodePort = 30081;
  single->externalIPs = {"2001:db8::7"};
  auto sf = trace::serviceFrontends(*single, {}, all, "", {"192.168.0.2", "2001:db8::1"});
  REQUIRE(sf.size() == 2);
  CHECK((sf[0].kind == "ClusterIP" && sf[1].kind == "NodePort" && sf[1].address == "192.168.0.2"));
  std::vector<std::string> got;
  for (const auto& x : f) got.push_back(x.kind + " " + x.address + ":" + std::to_string(x.port) + "/" + x.protocol + " " + x.portName);
  CHECK(got == std::vector<std::string>{"ClusterIP 172.30.0.10:80/tcp http", "ClusterIP fd00::10:80/tcp http",
                                        "externalIP 192.0.2.7:80/tcp http", "LoadBalancer 198.51.100.9:80/tcp http",
                                        "NodePort 192.168.0.2:30080/tcp http", "ClusterIP 172.30.0.10:53/udp dns",
                                        "ClusterIP fd00::10:53/udp dns", "externalIP 192.0.2.7:53/udp dns",
                                        "LoadBalancer 198.51.100.9:53/udp dns"});
  CHECK(trace::serviceFrontends(*s, {}, {"shop", "cart", "dns", false}, "", {}).size() == 4);
  CHECK(trace::serviceFrontends(*s, {}, {"shop", "cart", "", false}, "udp", {}).size() == 4);
  auto dns = trace::serviceFrontends(*s, {}, {"shop", "cart", "80", true}, "", {"192.168.0.2"});
  REQUIRE(dns.size() == 2);
  CHECK((dns[0].kind == "ClusterIP" && dns[1].kind == "ClusterIP"));

  auto hl = service("shop", "db", {}, {port("sql", 5432)});
  hl->headless = true;
  auto sl = slice("shop", "db-1", "db", {epPort("sql", 15432)}, {ready("10.0.1.7"), {"10.0.1.8", false}});
  auto hf = trace::serviceFrontends(*hl, {sl.get()}, {"shop", "db", "", false}, "", {});
  REQUIRE(hf.size() == 1);  // the ready one: what DNS returns
  CHECK((hf[0].kind == "endpoint" && hf[0].address == "10.0.1.7" && hf[0].port == 15432));
  auto hd = trace::serviceFrontends(*hl, {sl.get()}, {"shop", "db", "5432", true}, "", {});
  REQUIRE(hd.size() == 1);
  CHECK(hd[0].port == 5432);  // the client dials the port it named

  api::Service alias;
  alias.type = "ExternalName";
  alias.externalName = "192.0.2.44";
  alias.ports = {port("http", 80)};
  auto af = trace::serviceFrontends(alias, {}, {"shop", "x", "", false}, "", {});
  REQUIRE(af.size() == 1);
  CHECK((af[0].kind == "externalName" && af[0].address == "192.0.2.44"));
  alias.externalName = "db.example.com";
  CHECK(trace::serviceFrontends(alias, {}, {"shop", "x", "", false}, "", {}).empty());
}

TEST_CASE("causes: one refusal, four reasons, each named with its counts; an unknown port; no Service; a ServiceCIDR") {
  World w;
  w.st.upsertService(service("ns", "web", {"172.30.0.10"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "web-1", "web", {epPort("http", 8080)}, {ready("10.0.1.7")}));
  w.st.upsertService(service("ns", "noslice", {"172.30.0.11"}, {port("http", 80)}));
  w.st.upsertService(service("ns", "notready", {"172.30.0.12"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "notready-1", "notready", {epPort("http", 8080)},
                         {{"10.0.1.8", false, false, false}, {"10.0.1.9", false, false, true}, {"10.0.1.10", false, true, true}}));
  w.st.upsertService(service("ns", "mismatch", {"172.30.0.13"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "mismatch-1", "mismatch", {epPort("web", 8080)}, {ready("10.0.1.7")}));
  w.st.upsertService(service("ns", "v6only", {"172.30.0.14"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "v6only-1", "v6only", {epPort("http", 8080)}, {ready("fd00:10:0:1::7")}, "IPv6"));
  auto cidr = std::make_shared<api::ServiceCIDR>();
  cidr->meta.name = "kubernetes";
  cidr->cidrs = {"172.31.0.0/16"};
  w.st.upsertServiceCIDR(cidr);
  auto k = knownOf(w);

  auto r = reported(w, fromPod("172.30.0.11", 80), k);
  CHECK(r.verdict == "reject");
  CHECK(code(r) == "no-endpoint-slice");
  // A terminating endpoint that still serves is used (DNAT); without it, nothing is.
  r = reported(w, fromPod("172.30.0.12", 80), k);
  CHECK(r.verdict == "dnat");
  w.st.upsertSlice(slice("ns", "notready-1", "notready", {epPort("http", 8080)},
                         {{"10.0.1.8", false, false, false}, {"10.0.1.9", false, false, true}}));
  k = knownOf(w);
  r = reported(w, fromPod("172.30.0.12", 80), k);
  CHECK(r.verdict == "reject");
  REQUIRE(code(r) == "no-ready-endpoints");
  CHECK((count(r, "endpoints") == 2 && count(r, "ready") == 0 && count(r, "notReady") == 1 && count(r, "terminating") == 1));
  r = reported(w, fromPod("172.30.0.13", 80), k);
  REQUIRE(code(r) == "port-mismatch");
  CHECK(r.cause->objects == std::vector<std::string>{"web 8080/tcp"});
  r = reported(w, fromPod("172.30.0.14", 80), k);
  REQUIRE(code(r) == "no-endpoint-slice");
  CHECK(r.cause->message.rfind("no IPv4 EndpointSlice", 0) == 0);
  r = reported(w, fromPod("172.30.0.10", 81), k);
  CHECK(r.verdict == "reject");
  CHECK(code(r) == "unknown-port");
  r = reported(w, fromPod("172.30.9.9", 80), k);
  CHECK(r.verdict == "accept");
  REQUIRE(code(r) == "no-service");
  CHECK(r.cause->message.find("none of the 5 Services the daemon knows") != std::string::npos);
  r = reported(w, fromPod("172.31.0.5", 80), k);
  CHECK(r.verdict == "drop");
  REQUIRE(code(r) == "unallocated-service-cidr");
  CHECK(r.cause->message.find("ServiceCIDR kubernetes (172.31.0.0/16)") != std::string::npos);
  r = reported(w, fromPod("172.30.0.10", 80), k);
  CHECK(r.verdict == "dnat");
  CHECK_FALSE(r.cause);
}

TEST_CASE("causes: traffic policy Local, source ranges, topology; and what the daemon says first") {
  World w;
  auto lb = service("ns", "far", {"172.30.0.20"}, {port("p80", 80)});
  lb->type = "LoadBalancer";
  lb->ports[0].nodePort = 30080;
  lb->loadBalancerIngress = {{"198.51.100.20", "", ""}};
  lb->externalTrafficPolicy = "Local";
  lb->healthCheckNodePort = 32000;
  w.st.upsertService(lb);
  w.st.upsertSlice(slice("ns", "far-1", "far", {epPort("p80", 80)}, {ready("10.0.2.1", "node-b")}));
  auto fw = service("ns", "fw", {"172.30.0.21"}, {port("p80", 80)});
  fw->type = "LoadBalancer";
  fw->loadBalancerIngress = {{"198.51.100.21", "", ""}};
  fw->loadBalancerSourceRanges = {"203.0.113.0/25"};
  w.st.upsertService(fw);
  w.st.upsertSlice(slice("ns", "fw-1", "fw", {epPort("p80", 80)}, {ready("10.0.2.1", "node-b")}));
  auto node = std::make_shared<api::Node>(*w.st.node);
  node->meta.labels["topology.kubernetes.io/zone"] = "zone-a";
  w.st.setNode(node);
  auto topo = slice("ns", "topo-1", "topo", {epPort("http", 8080)}, {ready("10.0.1.7"), ready("10.0.1.8"), ready("10.0.2.1", "node-b")});
  const char* zones[] = {"zone-a", "zone-a", "zone-b"};
  for (size_t i = 0; i < 3; ++i) topo->endpoints[i].setHints({zones[i]}, {});
  w.st.upsertService(service("ns", "topo", {"172.30.0.22"}, {port("http", 80)}));
  w.st.upsertSlice(topo);
  auto k = knownOf(w);

  auto r = reported(w, packet(Entry::Prerouting, kOutside, "198.51.100.20", 80, api::Protocol::TCP, "eth0"), k);
  CHECK(r.verdict == "drop");
  REQUIRE(code(r) == "no-local-endpoint");
  CHECK(r.cause->message.rfind("externalTrafficPolicy Local: ns/far has 1 ready endpoint, on node-b", 0) == 0);
  CHECK(r.cause->message.find("health check node port 32000") != std::string::npos);
  r = reported(w, packet(Entry::Prerouting, "203.0.113.200", "198.51.100.21", 80, api::Protocol::TCP, "eth0"), k);
  CHECK(r.verdict == "drop");
  REQUIRE(code(r) == "source-range");
  CHECK(r.cause->objects == std::vector<std::string>{"203.0.113.0/25"});
  r = reported(w, fromPod("172.30.0.22", 80), k);
  CHECK(r.verdict == "dnat");
  CHECK(r.trace.candidates.size() == 2);
  REQUIRE(code(r) == "topology");
  CHECK(r.cause->message.rfind("topology (PreferSameZone): only the 2 endpoints hinted for this node's zone (zone-a) of 3", 0) == 0);
  // Hints that name no zone of this node: upstream uses every endpoint, and the cause says so.
  node = std::make_shared<api::Node>(*w.st.node);
  node->meta.labels["topology.kubernetes.io/zone"] = "zone-c";
  w.st.setNode(node);
  k = knownOf(w);
  r = reported(w, fromPod("172.30.0.22", 80), k);
  CHECK(r.trace.candidates.size() == 3);
  REQUIRE(code(r) == "topology");
  CHECK(r.cause->message.find("(zone-a, zone-b) name none for this node's zone (zone-c), so, as upstream, all 3") !=
        std::string::npos);

  // The daemon's word comes first: not synced, or the Service refused.
  k.daemon->source.synced = false;
  k.daemon->source.describe = "API server https://x";
  k.daemon->source.pending = "EndpointSlices";
  r = reported(w, fromPod("172.30.0.22", 80), k);
  REQUIRE(code(r) == "not-synced");
  CHECK(r.cause->message.find("has not listed EndpointSlices") != std::string::npos);
  k.daemon->source.synced = true;
  k.daemon->refused = {{"ns/topo", "Operation not permitted", "2024-01-01T00:00:00Z"}};
  r = reported(w, fromPod("172.30.0.22", 80), k);
  REQUIRE(code(r) == "refused");
  CHECK(r.cause->message.find("(since 2024-01-01T00:00:00Z): Operation not permitted") != std::string::npos);
}

TEST_CASE("causes: not ours (another proxy's label, headless, ExternalName), and nothing to trace") {
  auto other = service("ns", "other", {"172.30.0.40"}, {port("http", 80)});
  other->meta.labels["service.kubernetes.io/service-proxy-name"] = "cilium";
  World w;
  auto k = knownOf(w);
  nft::eval::Report r = nft::eval::makeReport(w.trace(fromPod("172.30.0.40", 80)));
  trace::CauseContext c;
  c.known = &k;
  c.service = other.get();
  c.excluded = true;
  r.cause = trace::causeOf(r, c);
  CHECK(r.verdict == "accept");
  REQUIRE(code(r) == "excluded");
  CHECK(r.cause->message.find("service.kubernetes.io/service-proxy-name=cilium") != std::string::npos);

  api::Service alias;
  alias.meta.ns = "ns";
  alias.meta.name = "ext";
  alias.type = "ExternalName";
  alias.externalName = "db.example.com\x1b[31m";  // from the API: never raw control characters on a terminal
  auto n = trace::nothingToTrace({"ns", "ext", "", false}, &k, &alias, false);
  CHECK(n.code == "external-name");
  CHECK(n.message.find("db.example.com?[31m") != std::string::npos);
  CHECK(trace::nothingToTrace({"ns", "nope", "", false}, &k, nullptr, false).code == "no-such-service");
  CHECK(trace::nothingToTrace({"ns", "nope", "", false}, nullptr, nullptr, false).code == "no-state");
}

TEST_CASE("drift: the kernel's elements of a Service against the state's, a missing, a changed and an extra one") {
  World w;
  w.st.upsertService(service("ns", "web", {"172.30.0.10"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "web-1", "web", {epPort("http", 8080)}, {ready("10.0.1.7"), ready("10.0.1.8")}));
  FakePipeline pipe(w.cfg);
  pipe.renderer.setHostAddresses(w.host);
  pipe.sync(w.st);
  const nft::Table& desired = pipe.committed.ruleset.tables.at(0);
  nft::ListedTable live;
  pipe.kernel.list(desired.family, desired.name, &live);
  CHECK_FALSE(trace::serviceDrift(live, desired, "ns/web").any());

  // Someone deleted slot 1 and put another endpoint in slot 0, and left an element of a Service
  // that is gone.
  // Slot 0 names the service port; slot 1, a neighbour by key, has no comment.
  auto& backends = live.sets.at("backends-tcp");
  std::string slot0, slot1;
  for (const auto& [key, comment] : backends.comments)
    if (comment == "ns/web:http") slot0 = key;
  REQUIRE_FALSE(slot0.empty());
  for (const auto& [key, value] : backends.elements)
    if (key != slot0 && key.substr(0, key.rfind(',')) == slot0.substr(0, slot0.rfind(','))) slot1 = key;
  REQUIRE_FALSE(slot1.empty());
  CHECK_FALSE(backends.comments.count(slot1));
  backends.elements.erase(slot1);
  backends.comments.erase(slot1);
  std::string v = backends.elements[slot0];
  backends.elements[slot0] = v.replace(v.find("10.0.1."), 8, "10.0.1.99");
  auto d = trace::serviceDrift(live, desired, "ns/web");
  REQUIRE(d.missing.size() == 1);
  CHECK(d.missing[0].rfind("@backends-tcp 172.30.0.10 . 80 . 1 : 10.0.1.", 0) == 0);
  REQUIRE(d.unexpected.size() == 1);
  CHECK(d.unexpected[0].find(": 10.0.1.99 . 8080 (the state says @backends-tcp 172.30.0.10 . 80 . 0 : 10.0.1.") !=
        std::string::npos);
  CHECK_FALSE(trace::serviceDrift(live, desired, "ns/other").any());

  // A slot without a comment that the state does not have is the service's by its destination.
  std::string slot2 = slot1.substr(0, slot1.rfind(',')) + ",2]}";
  backends.elements[slot2] = backends.elements[slot0];
  auto extra = trace::serviceDrift(live, desired, "ns/web");
  REQUIRE(extra.unexpected.size() == 2);
  CHECK(extra.unexpected[1].rfind("@backends-tcp 172.30.0.10 . 80 . 2 : 10.0.1.99 . 8080", 0) == 0);
  CHECK_FALSE(trace::serviceDrift(live, desired, "ns/other").any());

  // A key is read as JSON, not as text: a slot spelled with other whitespace is still a slot of
  // the destination; one of another destination (port 81) is not the service's.
  backends.elements.erase(slot2);
  const std::string spacedSlot = R"({ "concat" : [ "172.30.0.10" , 80 , 3 ] })";
  backends.elements[spacedSlot] = backends.elements[slot0];
  backends.elements[R"({ "concat" : [ "172.30.0.10" , 81 , 0 ] })"] = backends.elements[slot0];
  auto spaced = trace::serviceDrift(live, desired, "ns/web");
  REQUIRE(spaced.unexpected.size() == 2);
  // (Its text is its JSON: the native text is written only from the compact spelling.)
  CHECK(spaced.unexpected[1] == "@backends-tcp " + spacedSlot + " : 10.0.1.99 . 8080");
}

TEST_CASE("report JSON: the contract's fields unchanged, cause, frontend and state added; a Service report") {
  World w;
  w.st.upsertService(service("ns", "web", {"172.30.0.10"}, {port("http", 80)}));
  nft::eval::Report r = nft::eval::makeReport(w.trace(fromPod("172.30.0.10", 80)));
  trace::explainForOurLayout(r);
  rapidjson::Document d;
  std::string plain = nft::eval::reportJson(r);
  d.Parse(plain.c_str());
  REQUIRE_FALSE(d.HasParseError());
  for (const char* k : {"family", "verdict", "service", "candidates", "masquerade", "masqueradeReason", "reason", "path",
                        "pathComplete", "sticky", "chains"})
    CHECK_MESSAGE(d.HasMember(k), k);
  CHECK(d["cause"].IsNull());
  CHECK(d["frontend"].IsNull());
  CHECK(d["state"].IsNull());
  r.cause = nft::eval::Cause{"no-endpoint-slice", "no EndpointSlice: ...", {{"slices", 0}}, {"a", "b"}};
  r.frontend = nft::eval::Frontend{"ClusterIP", "ns/web", "http"};
  r.state = nft::eval::StateInfo{"daemon", true, 3, ""};
  d.Parse(nft::eval::reportJson(r).c_str());
  CHECK(std::string(d["cause"]["code"].GetString()) == "no-endpoint-slice");
  CHECK(d["cause"]["counts"]["slices"].GetInt() == 0);
  CHECK(d["cause"]["objects"].Size() == 2);
  CHECK(std::string(d["frontend"]["kind"].GetString()) == "ClusterIP");
  CHECK(d["state"]["servicesKnown"].GetInt() == 3);
  std::string text = nft::eval::reportText(r);
  CHECK(text.find("cause: no EndpointSlice: ...\n  - a\n  - b\n") != std::string::npos);

  nft::eval::ServiceReport s;
  s.service = "ns/web";
  s.frontends = {r, r};
  s.skipped = {"ClusterIP fd00::10:80: no --src of this address family was given"};
  d.Parse(nft::eval::serviceReportJson(s).c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(std::string(d["verdict"].GetString()) == r.verdict);  // the first address, for a one-trace reader
  CHECK(d["frontends"].Size() == 2);
  CHECK(d["target"]["port"].IsNull());
  CHECK(d["skipped"].Size() == 1);
  s.frontends.clear();
  s.cause = nft::eval::Cause{"external-name", "ExternalName: ...", {}, {}};
  d.Parse(nft::eval::serviceReportJson(s).c_str());
  CHECK_FALSE(d.HasMember("verdict"));
  CHECK(std::string(d["cause"]["code"].GetString()) == "external-name");
  CHECK(nft::eval::serviceReportText(s) == "service ns/web: nothing to trace\ncause: ExternalName: ...\n");
}
