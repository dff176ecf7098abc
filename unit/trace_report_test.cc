// The `trace` command's report (nft/eval/trace_report, pkg/trace/explain) for every traffic path of the
// behaviour tests: the verdict, service, candidates, masquerade decision and reason, in text and
// in the JSON contract of docs/trace.md, traced through the rendered model and through the fake
// kernel's listing (what `trace` reads on a node) alike.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <set>

#include "nft/rule_text.h"
#include "nft/eval/trace_report.h"
#include "pkg/trace/explain.h"
#include "pkg/trace/node_view.h"
#include "pkg/trace/request.h"
#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using nft::eval::Entry;

namespace {

Ep ready(const std::string& ip, const std::string& node) { return {ip, true, true, false, node}; }

api::ServicePort npPort(const std::string& name, int32_t p, int32_t np) {
  auto sp = port(name, p);
  sp.nodePort = np;
  return sp;
}

// What the JSON of one trace says, after checking it keeps the contract.
struct Json {
  rapidjson::Document doc;
  std::string verdict, reason, masqueradeReason;
  std::optional<std::string> service;
  bool masquerade = false;
  std::vector<std::string> candidates;  // "address:port source"
  std::vector<std::string> pathChains;
};

Json checkJson(const std::string& text) {
  Json j;
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  j.doc.Parse(text.c_str());
  REQUIRE_MESSAGE(!j.doc.HasParseError(), text);
  const auto& d = j.doc;
  REQUIRE(d.IsObject());
  for (const char* k : {"family", "verdict", "reason", "masqueradeReason"}) REQUIRE_MESSAGE(d[k].IsString(), k);
  std::string family = d["family"].GetString();
  CHECK((family == "ip" || family == "ip6"));
  j.verdict = d["verdict"].GetString();
  CHECK(std::set<std::string>{"dnat", "reject", "drop", "accept"}.count(j.verdict) == 1);
  REQUIRE((d["service"].IsNull() || d["service"].IsString()));
  if (d["service"].IsString()) j.service = d["service"].GetString();
  REQUIRE(d["masquerade"].IsBool());
  j.masquerade = d["masquerade"].GetBool();
  j.reason = d["reason"].GetString();
  j.masqueradeReason = d["masqueradeReason"].GetString();
  REQUIRE(d["candidates"].IsArray());
  double sum = 0;
  for (const auto& c : d["candidates"].GetArray()) {
    REQUIRE(c["address"].IsString());
    REQUIRE(c["port"].IsUint());
    REQUIRE(c["probability"].IsNumber());
    sum += c["probability"].GetDouble();
    j.candidates.push_back(std::string(c["address"].GetString()) + ":" + std::to_string(c["port"].GetUint()) + " " +
                           c["source"].GetString());
  }
  if (j.verdict == "dnat") {
    CHECK(sum == doctest::Approx(1.0));
  } else {
    CHECK(j.candidates.empty());
  }
  REQUIRE(d["path"].IsArray());
  for (const auto& s : d["path"].GetArray()) {
    REQUIRE(s["chain"].IsString());
    REQUIRE(s["match"].IsString());
    REQUIRE(s["verdict"].IsString());
    if (s["chain"].GetStringLength() > 0) j.pathChains.push_back(s["chain"].GetString());
  }
  CHECK(!j.pathChains.empty());  // every path passes at least one rule of the table
  std::sort(j.candidates.begin(), j.candidates.end());
  return j;
}

struct Traced {
  nft::eval::Report report;
  std::string text;
  Json json;
};

// Reports the packet through the model and through the fake kernel: the two must agree on
// everything but the rules' spelling (our text vs text read back from the JSON).
Traced traced(World& w, const nft::eval::Packet& p) {
  auto [model, kernel] = w.traces(p);
  nft::eval::Report r = nft::eval::makeReport(std::move(model));
  nft::eval::Report k = nft::eval::makeReport(std::move(kernel));
  trace::explainForOurLayout(r);
  trace::explainForOurLayout(k);
  CHECK(k.verdict == r.verdict);
  CHECK(k.service == r.service);
  CHECK(k.reason == r.reason);
  CHECK(k.masquerade == r.masquerade);
  CHECK(k.masqueradeWhy == r.masqueradeWhy);
  REQUIRE(k.path.size() == r.path.size());
  for (size_t i = 0; i < r.path.size(); ++i) CHECK(k.path[i].chain == r.path[i].chain);
  Traced t{r, nft::eval::reportText(r), {}};
  INFO(t.text);
  t.json = checkJson(nft::eval::reportJson(r));
  CHECK(t.json.verdict == r.verdict);
  // The text carries the same verdict and reason.
  CHECK(t.text.find("verdict: " + r.verdict + " — " + r.reason + "\n") != std::string::npos);
  if (r.service) CHECK(t.text.find("service: " + *r.service + "\n") != std::string::npos);
  return t;
}

nft::eval::Packet pod(const std::string& to, uint16_t port, const std::string& src = "10.0.1.5",
                      api::Protocol proto = api::Protocol::TCP) {
  return packet(Entry::Prerouting, src, to, port, proto, "veth1");
}
nft::eval::Packet outside(const std::string& to, uint16_t port, const std::string& src = kOutside) {
  return packet(Entry::Prerouting, src, to, port, api::Protocol::TCP, "eth0");
}
nft::eval::Packet node(const std::string& to, uint16_t port) {
  return packet(Entry::Output, to.find(':') == std::string::npos ? kNodeIP : kNodeIP6, to, port, api::Protocol::TCP, "");
}

void addWeb(World& w) {
  w.st.upsertService(service("ns", "web", {"172.30.0.10", "fd00:172:30::10"}, {port("http", 80)}));
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)}, {ready("10.0.1.7", "node-a"), ready("10.0.2.1", "node-b")}));
  w.st.upsertSlice(slice("ns", "web-6", "web", {epPort("http", 8080)},
                         {ready("fd00:10:0:1::7", "node-a"), ready("fd00:10:0:2::1", "node-b")}, "IPv6"));
}

std::shared_ptr<api::Service> lb(World& w, const std::string& name, const std::string& clusterIP, int32_t nodePort,
                                 const std::string& lbIP, const std::string& etp) {
  auto s = service("ns1", name, {clusterIP}, {npPort("p80", 80, nodePort)});
  s->type = "LoadBalancer";
  s->loadBalancerIngress = {{lbIP, "", ""}};
  s->externalTrafficPolicy = etp;
  w.st.upsertService(s);
  return s;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("trace report: a ClusterIP from a pod: DNAT to both endpoints at 1/2, source kept, the element's service") {
  World w;
  addWeb(w);
  auto t = traced(w, pod("172.30.0.10", 80));
  INFO(t.text);
  CHECK(t.json.verdict == "dnat");
  CHECK(t.json.service == "ns/web:http");
  CHECK(t.json.candidates == std::vector<std::string>{"10.0.1.7:8080 10.0.1.5", "10.0.2.1:8080 10.0.1.5"});
  CHECK_FALSE(t.json.masquerade);
  CHECK(has(t.json.masqueradeReason, "no masquerade rule matched"));
  CHECK(has(t.json.reason, "DNAT to 2 candidates of ns/web:http, chosen at random"));
  CHECK(t.report.pathComplete);
  // The slot-0 lookup that lets the destination into the pick: its key, the element and its
  // comment; then the pick on the first missing slot (2), merged.
  CHECK(has(t.text, "@backends-tcp key 172.30.0.10 . 80 . 0: element 172.30.0.10 . 80 . 0 \"ns/web:http\" : 10.0.1.7 . 8080\n"));
  CHECK(has(t.text, "ip daddr . th dport . meta length & 2 | 2 != @backends-tcp dnat ip to"));
  CHECK(has(t.text, "→ dnat to one of 2 candidates\n"));
  CHECK(has(t.text, "[1] 50% (random) 10.0.1.7:8080, source seen 10.0.1.5\n"));
  CHECK(has(t.text, "masquerade: no — "));
  // The chains as nft monitor trace names them: the nat dispatch, the filter checks, postrouting.
  const auto& chains = t.report.trace.candidates[0].chains;
  CHECK(std::find(chains.begin(), chains.end(), "services") != chains.end());
  CHECK(std::find(chains.begin(), chains.end(), "nat-postrouting") != chains.end());
  std::vector<std::string> json;
  for (const auto& c : t.json.doc["chains"].GetArray()) json.push_back(c.GetString());
  CHECK(json == chains);
}

TEST_CASE("trace report: the node and outside clients to a ClusterIP are masqueraded, and the text says by which rule") {
  World w;
  addWeb(w);
  auto fromNode = traced(w, node("172.30.0.10", 80));
  CHECK(fromNode.json.masquerade);
  CHECK(fromNode.json.candidates == std::vector<std::string>{"10.0.1.7:8080 192.168.0.2", "10.0.2.1:8080 192.168.0.2"});
  CHECK(has(fromNode.json.masqueradeReason, "masquerade ClusterIP traffic from outside the cluster CIDR"));
  CHECK(has(fromNode.text, "masquerade: yes — masqueraded to 192.168.0.2 in chain "));
  auto fromOutside = traced(w, outside("172.30.0.10", 80));
  CHECK(fromOutside.json.masquerade);
  CHECK(has(fromOutside.json.masqueradeReason, "from outside the cluster CIDR"));
  auto v6 = traced(w, pod("fd00:172:30::10", 80, "fd00:10:0:1::5"));
  CHECK(std::string(v6.json.doc["family"].GetString()) == "ip6");
  CHECK(v6.json.candidates == std::vector<std::string>{"fd00:10:0:1::7:8080 fd00:10:0:1::5", "fd00:10:0:2::1:8080 fd00:10:0:1::5"});
  CHECK(has(v6.text, "[fd00:10:0:1::7]:8080"));
}

TEST_CASE("trace report: hairpin: only the endpoint reaching itself is masqueraded; the paths part there") {
  World w;
  addWeb(w);
  auto t = traced(w, pod("172.30.0.10", 80, "10.0.1.7"));
  CHECK(t.json.verdict == "dnat");
  CHECK(t.json.masquerade);
  CHECK(t.json.candidates == std::vector<std::string>{"10.0.1.7:8080 192.168.0.2", "10.0.2.1:8080 10.0.1.7"});
  CHECK(has(t.json.masqueradeReason, "only to 10.0.1.7:8080: "));
  CHECK(has(t.json.masqueradeReason, "hairpin"));
  CHECK_FALSE(t.report.pathComplete);
  CHECK_FALSE(t.json.doc["pathComplete"].GetBool());
  CHECK(has(t.text, "then for [1]:\n"));
}

TEST_CASE("trace report: refused and dropped, each with its reason") {
  World w;
  addWeb(w);
  w.st.upsertService(service("ns", "empty", {"172.30.0.20"}, {port("http", 80)}));
  auto sc = std::make_shared<api::ServiceCIDR>();
  sc->meta.name = "kubernetes";
  sc->cidrs = {"172.30.0.0/16"};
  w.st.upsertServiceCIDR(sc);

  auto noEndpoints = traced(w, pod("172.30.0.20", 80));
  CHECK(noEndpoints.json.verdict == "reject");
  CHECK(noEndpoints.json.service == "ns/empty:http");
  CHECK(has(noEndpoints.json.reason, "no endpoints: ns/empty:http has no ready or serving endpoint"));
  CHECK(traced(w, node("172.30.0.20", 80)).json.verdict == "reject");

  auto unknownPort = traced(w, pod("172.30.0.10", 81));
  CHECK(unknownPort.json.verdict == "reject");
  CHECK(has(unknownPort.json.reason, "unknown port: 172.30.0.10 is a ClusterIP, but no service has tcp port 81"));

  auto unallocated = traced(w, pod("172.30.0.99", 80));
  CHECK(unallocated.json.verdict == "drop");
  CHECK(has(unallocated.json.reason, "unallocated ServiceCIDR address: 172.30.0.99"));

  auto untouched = traced(w, pod("172.31.0.1", 80));
  CHECK(untouched.json.verdict == "accept");
  CHECK_FALSE(untouched.json.service);
  CHECK(has(untouched.json.reason, "accepted untouched"));
  CHECK(has(untouched.text, "masquerade: no — "));
}

TEST_CASE("trace report: internalTrafficPolicy Local with endpoints only elsewhere drops, saying why") {
  World w;
  addWeb(w);
  auto web = std::make_shared<api::Service>(*w.st.services.at("ns/web"));
  web->internalTrafficPolicy = "Local";
  w.st.upsertService(web);
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)}, {ready("10.0.2.1", "node-b")}));
  auto t = traced(w, pod("172.30.0.10", 80));
  CHECK(t.json.verdict == "drop");
  CHECK(has(t.json.reason, "traffic policy Local: ns/web:http has endpoints, but none on this node"));
}

TEST_CASE("trace report: NodePort and LoadBalancer with both traffic policies, and a source range") {
  World w;
  lb(w, "cl", "172.30.0.41", 3001, "1.2.3.4", "Cluster");
  w.st.upsertSlice(slice("ns1", "cl-1", "cl", {epPort("p80", 80)}, {ready("10.180.0.1", "node-b"), ready("10.180.2.1", "node-a")}));
  lb(w, "loc", "172.30.0.42", 3002, "5.6.7.8", "Local");
  w.st.upsertSlice(slice("ns1", "loc-1", "loc", {epPort("p80", 80)}, {ready("10.180.0.2", "node-b"), ready("10.180.2.2", "node-a")}));
  lb(w, "far", "172.30.0.45", 3005, "5.6.7.9", "Local");
  w.st.upsertSlice(slice("ns1", "far-1", "far", {epPort("p80", 80)}, {ready("10.180.0.5", "node-b")}));
  auto fw = lb(w, "fw", "172.30.0.46", 3006, "1.2.3.6", "Cluster");
  fw->loadBalancerSourceRanges = {"203.0.113.0/25"};
  w.st.upsertService(fw);
  w.st.upsertSlice(slice("ns1", "fw-1", "fw", {epPort("p80", 80)}, {ready("10.180.0.6", "node-b")}));

  for (auto [dst, port] : {std::pair<std::string, uint16_t>{kNodeIP, 3001}, {"1.2.3.4", 80}}) {
    auto t = traced(w, outside(dst, port));
    CHECK(t.json.verdict == "dnat");
    CHECK(t.json.service == "ns1/cl:p80");
    CHECK(t.json.masquerade);
    CHECK(has(t.json.masqueradeReason, "eTP=Cluster"));
    CHECK(t.json.candidates.size() == 2);
  }
  for (auto [dst, port] : {std::pair<std::string, uint16_t>{kNodeIP, 3002}, {"5.6.7.8", 80}}) {
    auto t = traced(w, outside(dst, port));
    CHECK(t.json.verdict == "dnat");
    CHECK_FALSE(t.json.masquerade);
    CHECK(t.json.candidates == std::vector<std::string>{"10.180.2.2:80 198.51.100.50"});
    CHECK(has(t.json.reason, "externalTrafficPolicy Local: only this node's endpoints, the client's address kept"));
  }
  for (auto [dst, port] : {std::pair<std::string, uint16_t>{kNodeIP, 3005}, {"5.6.7.9", 80}}) {
    auto t = traced(w, outside(dst, port));
    CHECK(t.json.verdict == "drop");
    CHECK(has(t.json.reason, "traffic policy Local: ns1/far:p80 has endpoints, but none on this node"));
  }
  auto allowed = traced(w, outside("1.2.3.6", 80, "203.0.113.7"));
  CHECK(allowed.json.verdict == "dnat");
  auto blocked = traced(w, outside("1.2.3.6", 80, "203.0.113.200"));
  CHECK(blocked.json.verdict == "drop");
  CHECK(blocked.json.service == "ns1/fw:p80");
  CHECK(has(blocked.json.reason, "source range: 203.0.113.200 is not in loadBalancerSourceRanges of ns1/fw"));
}

TEST_CASE("trace report: UDP and SCTP service ports resolve to their own target ports") {
  World w;
  w.st.upsertService(service("ns", "dns", {"172.30.0.53"}, {port("dns", 53, api::Protocol::UDP), port("sig", 2905, api::Protocol::SCTP)}));
  w.st.upsertSlice(slice("ns", "dns-1", "dns", {epPort("dns", 5353, api::Protocol::UDP), epPort("sig", 2906, api::Protocol::SCTP)},
                         {ready("10.0.2.1", "node-b")}));
  auto udp = traced(w, pod("172.30.0.53", 53, "10.0.1.5", api::Protocol::UDP));
  CHECK(udp.json.service == "ns/dns:dns");
  CHECK(udp.json.candidates == std::vector<std::string>{"10.0.2.1:5353 10.0.1.5"});
  auto sctp = traced(w, pod("172.30.0.53", 2905, "10.0.1.5", api::Protocol::SCTP));
  CHECK(sctp.json.service == "ns/dns:sig");
  CHECK(sctp.json.candidates == std::vector<std::string>{"10.0.2.1:2906 10.0.1.5"});
}

TEST_CASE("trace request: the flags, and one line saying which is bad") {
  std::string err;
  auto ok = trace::parseRequest({"--from=pod", "--src=10.0.1.5:4000", "--dst", "172.30.0.10:80", "--proto=tcp",
                                 "--manifests=/m", "--output=json"},
                                &err);
  REQUIRE_MESSAGE(ok, err);
  CHECK(ok->request.src == "10.0.1.5");
  CHECK(ok->request.sport == 4000);
  CHECK(ok->request.dport == 80);
  CHECK(ok->request.output == trace::Output::Json);
  CHECK(ok->rest == std::vector<std::string>{"--manifests=/m"});
  auto v6 = trace::parseRequest({"--from=external", "--src=2001:db8::5", "--dst=[fd00::10]:443", "--proto=sctp", "--iif=eth1"}, &err);
  REQUIRE_MESSAGE(v6, err);
  CHECK_FALSE(v6->request.sport);
  auto p = trace::packetOf(v6->request, v6->request.iif);
  CHECK(p.family == nft::Family::IPv6);
  CHECK(p.iifname == "eth1");
  CHECK(p.entry == Entry::Prerouting);

  auto bad = [&](std::vector<std::string> args) {
    err.clear();
    CHECK_FALSE(trace::parseRequest(args, &err));
    CHECK(err.find('\n') == std::string::npos);
    return err;
  };
  std::vector<std::string> good = {"--from=pod", "--src=10.0.1.5", "--dst=172.30.0.10:80", "--proto=tcp"};
  CHECK(bad({"--src=10.0.1.5", "--dst=172.30.0.10:80", "--proto=tcp"}) == "trace: --from is required");
  CHECK(bad({"--from=moon", "--src=10.0.1.5", "--dst=172.30.0.10:80", "--proto=tcp"}) == "trace: --from=moon: pod, node or external");
  CHECK(has(bad({"--from=pod", "--src=10.0.1", "--dst=172.30.0.10:80", "--proto=tcp"}), "--src=10.0.1: \"10.0.1\" is not an IP address"));
  CHECK(has(bad({"--from=pod", "--src=10.0.1.5", "--dst=172.30.0.10", "--proto=tcp"}), "--dst=172.30.0.10: IP:PORT"));
  CHECK(has(bad({"--from=pod", "--src=10.0.1.5", "--dst=172.30.0.10:70000", "--proto=tcp"}), "is not 1..65535"));
  CHECK(has(bad({"--from=pod", "--src=fd00::5", "--dst=172.30.0.10:80", "--proto=tcp"}), "different IP families"));
  CHECK(has(bad({"--from=pod", "--src=10.0.1.5", "--dst=172.30.0.10:80", "--proto=icmp"}), "--proto=icmp: tcp, udp or sctp"));
  CHECK(has(bad({"--from=node", "--src=10.0.1.5", "--dst=172.30.0.10:80", "--proto=tcp", "--iif=eth0"}), "no input interface"));
  good.push_back("--output=yaml");
  CHECK(has(bad(good), "--output=yaml: text or json"));
  CHECK(has(bad({"--from=pod", "--from=node"}), "--from is given twice"));
  CHECK(has(bad({"--from"}), "--from needs a value"));
}

TEST_CASE("rule text: every rule we render reads as nft lists it, never as its JSON") {
  World w;
  addWeb(w);
  lb(w, "loc", "172.30.0.42", 3002, "5.6.7.8", "Local");
  auto fw = lb(w, "fw", "172.30.0.46", 3006, "1.2.3.6", "Cluster");
  fw->loadBalancerSourceRanges = {"203.0.113.0/25"};
  w.st.upsertService(fw);
  auto sc = std::make_shared<api::ServiceCIDR>();
  sc->meta.name = "kubernetes";
  sc->cidrs = {"172.30.0.0/16", "fd00:172:30::/112"};
  w.st.upsertServiceCIDR(sc);
  FakePipeline pipe(w.cfg);
  pipe.renderer.setHostAddresses(w.host);
  pipe.sync(w.st);
  std::set<std::string> texts;
  for (const auto& t : pipe.committed.ruleset.tables)
    for (const auto& [owner, part] : t.parts)
      for (const auto& c : part->chains)
        for (const auto& r : c.rules) {
          INFO(c.name << ": " << r.exprJson);
          std::string text = nft::ruleTextFromJson(r.exprJson);
          CHECK(text.find('{') == std::string::npos);  // read, not the JSON back
          texts.insert(text);
        }
  CHECK(texts.size() > 30);
  // As `nft list table ip kube-proxy` prints them (nft 1.0.6).
  for (const char* listed :
       {"meta mark & 0x00004000 == 0x00004000 meta mark set meta mark ^ 0x00004000 masquerade fully-random",
        "ct status dnat ip saddr . ip daddr @hairpin masquerade fully-random", "ip daddr @cluster-ips reject", "reject",
        "ip daddr 172.30.0.0/16 drop", "ip6 daddr fd00:172:30::/112 drop", "ct state new jump firewall-check",
        "ip daddr . th dport . meta length & 2 | 2 != @backends-tcp dnat ip to ip daddr . tcp dport . numgen random mod 2 map @backends-tcp",
        "ip daddr . tcp dport . meta length & 0 @backends-tcp goto pick-tcp",
        "ip saddr != 10.0.0.0/8 fib saddr type != local ip daddr . meta l4proto . th dport vmap @local-service-ips",
        "ip daddr @cluster-ips jump cluster-ip-services", "ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x00004000",
        "ip daddr . meta l4proto . th dport @firewall-ips ip daddr . meta l4proto . th dport . ip saddr != "
        "@firewall-allow drop",
        "meta l4proto . th dport vmap @service-nodeports",
        "ip daddr @nodeport-ips goto nodeports",
        "ip daddr set ip daddr . meta l4proto . th dport map @external-cluster-ips meta mark set meta mark | 0x00004000 "
        "goto pick",
        "ip daddr set ip daddr . meta l4proto . th dport map @local-external-cluster-ips goto pick",
        "ip daddr set meta l4proto . tcp dport map @nodeport-cluster-ips tcp dport set meta l4proto . tcp dport map "
        "@nodeport-cluster-ports meta mark set meta mark | 0x00004000 goto pick"})
    CHECK_MESSAGE(texts.count(listed) == 1, listed);
  // A bit operation's operands and the value it is compared with: hex on a mark, decimal on any
  // other integer (nft 1.0.6 lists `meta length & 2 == 2`, `ct mark & 0x00000010 == 0x00000010`).
  CHECK(nft::ruleTextFromJson(R"([{"match":{"op":"==","left":{"&":[{"meta":{"key":"length"}},2]},"right":2}}])") ==
        "meta length & 2 == 2");
  CHECK(nft::ruleTextFromJson(R"([{"match":{"op":"==","left":{"&":[{"ct":{"key":"mark"}},16]},"right":16}}])") ==
        "ct mark & 0x00000010 == 0x00000010");
  CHECK(nft::ruleTextFromJson(R"([{"osf":{}}])") == R"([{"osf":{}}])");  // unknown: the JSON itself
}

TEST_CASE("trace node view: the most specific route's interface; a masqueraded candidate leaves with the address chosen toward it") {
  std::vector<nft::eval::Route> routes = {{"0.0.0.0/0", "eth0"}, {"10.244.0.0/16", "cni0"}, {"10.244.0.11/32", "veth1"},
                                          {"::/0", "eth0"}, {"fd00:10:244::/64", "cni0"}};
  CHECK(trace::routeInterface(routes, "10.244.0.11") == "veth1");
  CHECK(trace::routeInterface(routes, "10.244.0.12") == "cni0");
  CHECK(trace::routeInterface(routes, "8.8.8.8") == "eth0");
  CHECK(trace::routeInterface(routes, "fd00:10:244::5") == "cni0");
  CHECK(trace::routeInterface({}, "8.8.8.8") == "");

  World w;
  addWeb(w);
  auto t = w.trace(node("172.30.0.10", 80));
  REQUIRE(t.candidates.size() == 2);
  trace::refineMasquerade(t, [](const std::string& dst) -> std::optional<std::string> {
    if (dst == "10.0.1.7") return std::string("10.0.1.1");  // this node's address on the pod bridge
    return std::nullopt;                                    // no route: the evaluator's stays
  });
  for (const auto& c : t.candidates) {
    CHECK(c.sourceSeen == (c.address == "10.0.1.7" ? "10.0.1.1" : "192.168.0.2"));
    for (const auto& s : c.path)
      if (s.action.find("masquerade to ") != std::string::npos)
        CHECK(s.action.find("masquerade to " + c.sourceSeen) != std::string::npos);
  }
  // The real chooser: loopback is always routable, from loopback.
  CHECK(trace::sourceAddressToward("127.0.0.1") == std::optional<std::string>("127.0.0.1"));
}

TEST_CASE("trace report: session affinity: no entry, a random first pick that creates one; an entry, its one endpoint") {
  World w;
  auto web = service("ns", "web", {"172.30.0.10"}, {port("http", 80)});
  web->sessionAffinity = "ClientIP";
  web->sessionAffinityTimeoutSeconds = 600;
  w.st.upsertService(web);
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)},
                         {ready("10.0.1.7", "node-a"), ready("10.0.2.1", "node-b"), ready("10.0.2.2", "node-b")}));

  // A client without an entry: three candidates at random, and the entry the connection creates.
  auto fresh = traced(w, pod("172.30.0.10", 80));
  INFO(fresh.text);
  REQUIRE(fresh.report.sticky);
  CHECK(fresh.report.sticky->set == "sticky-tcp");
  CHECK_FALSE(fresh.report.sticky->entry);
  CHECK(fresh.report.sticky->timeout == 600);
  CHECK(fresh.json.candidates.size() == 3);
  CHECK(has(fresh.text, "sticky: @sticky-tcp holds no entry for this client: the first pick is random among the 3 "
                        "candidates, and the connection creates the entry (timeout 600 s)\n"));
  const auto& js = fresh.json.doc["sticky"];
  REQUIRE(js.IsObject());
  CHECK(std::string(js["set"].GetString()) == "sticky-tcp");
  CHECK(js["entry"].IsNull());
  CHECK(js["expiresIn"].IsNull());
  CHECK(js["timeout"].GetUint() == 600);
  CHECK(js["kernelEntries"].GetBool());

  // The same client once the second candidate's connection left its entry: that endpoint alone.
  const auto& second = fresh.report.trace.candidates[1];
  REQUIRE(second.recorded.size() == 1);
  w.env.dynamicEntries = second.recorded;
  auto held = traced(w, pod("172.30.0.10", 80));
  w.env.dynamicEntries.clear();
  INFO(held.text);
  REQUIRE(held.report.sticky);
  CHECK(held.report.sticky->entry == second.recorded[0].text);
  CHECK(held.json.candidates == std::vector<std::string>{second.address + ":8080 10.0.1.5"});
  CHECK(held.report.trace.candidates[0].probability == doctest::Approx(1.0));
  CHECK(has(held.text, "sticky: @sticky-tcp holds " + second.recorded[0].text + ": the client goes to its slot's endpoint " +
                           second.address + ":8080 with probability 1"));
  CHECK(std::string(held.json.doc["sticky"]["entry"].GetString()) == second.recorded[0].text);
  // The entry: client . scope (the ClusterIP 172.30.0.10 as a number) . port 80 << 16 | slot.
  CHECK(has(second.recorded[0].text, "10.0.1.5 . 2887647242 . 52428"));

  // The port's chain's update reads as a rule, not as its JSON.
  CHECK(has(held.text, "update @sticky-tcp { ip saddr . numgen random mod 1 offset 2887647242 . numgen random mod 1 offset 52428"));
  CHECK(nft::ruleTextFromJson(
            R"([{"set":{"op":"update","elem":{"elem":{"val":{"concat":[{"payload":{"protocol":"ip","field":"saddr"}},)"
            R"({"numgen":{"mode":"random","mod":1,"offset":2}}]},"timeout":600}},"set":"@affinity-tcp"}}])") ==
        "update @affinity-tcp { ip saddr . numgen random mod 1 offset 2 timeout 600s }");

  // A rendered table (--manifests) has no kernel entries, and says so.
  auto rendered = nft::eval::makeReport(w.trace(pod("172.30.0.10", 80)), /*kernelEntries=*/false);
  REQUIRE(rendered.sticky);
  CHECK_FALSE(rendered.sticky->kernelEntries);
  CHECK(has(nft::eval::reportText(rendered), "a rendered table has no kernel entries"));
  CHECK(has(nft::eval::reportJson(rendered), "\"kernelEntries\":false"));

  // A service without affinity has no sticky field's object.
  addWeb(w);
  auto plain = traced(w, pod("fd00:172:30::10", 80, "fd00:10:0:1::5"));
  CHECK_FALSE(plain.report.sticky);
  CHECK(plain.json.doc["sticky"].IsNull());
  CHECK_FALSE(has(plain.text, "sticky:"));
}
