#include <doctest/doctest.h>
#include <set>


#include "nft/diff.h"
#include "pkg/render/comment.h"
#include "pkg/render/layout.h"
#include "pkg/render/render.h"
#include "pkg/services/endpoints.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

services::NodeConfig config() {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  cfg.clusterCidrV4 = net::parseCidr("10.244.0.0/16");
  return cfg;
}

std::vector<std::string> ips(const std::vector<services::EndpointChoice>& eps) {
  std::vector<std::string> out;
  for (auto& e : eps) out.push_back(e.ip + ":" + std::to_string(e.port));
  return out;
}

std::string renderText(const state::ClusterState& st, const services::NodeConfig& cfg) {
  render::Renderer r(cfg);
  return nft::planReconcile({}, r.render(st, nullptr)).txn.toText();
}

}  // namespace

TEST_CASE("endpoints are joined across slices by port name and protocol, port from the slice") {
  auto svcPort = port("http", 80);
  auto a = slice("ns", "s-1", "svc", {epPort("http", 8080), epPort("metrics", 9090)}, {{"10.0.0.1"}, {"10.0.0.2", false}});
  auto b = slice("ns", "s-2", "svc", {epPort("http", 8081)}, {{"10.0.0.3", std::nullopt, std::nullopt, std::nullopt, "node-a"}});
  auto udp = slice("ns", "s-3", "svc", {epPort("http", 53, api::Protocol::UDP)}, {{"10.0.0.4"}});
  auto eps = services::usableEndpoints(svcPort, {a.get(), b.get(), udp.get()}, "IPv4", "node-a");
  CHECK(ips(eps) == std::vector<std::string>{"10.0.0.1:8080", "10.0.0.3:8081"});
  CHECK_FALSE(eps[0].local);
  CHECK(eps[1].local);
}

TEST_CASE("ready endpoints win; without any, serving terminating ones are used; others never") {
  auto p = port("", 80);
  auto mixed = slice("ns", "s", "svc", {epPort("", 80)},
                     {{"10.0.0.1", true}, {"10.0.0.2", false, true, true}, {"10.0.0.3", false, false, true}});
  CHECK(ips(services::usableEndpoints(p, {mixed.get()}, "IPv4", "")) == std::vector<std::string>{"10.0.0.1:80"});
  auto terminating = slice("ns", "s", "svc", {epPort("", 80)},
                           {{"10.0.0.2", false, true, true}, {"10.0.0.3", false, false, true}, {"10.0.0.4", false}});
  CHECK(ips(services::usableEndpoints(p, {terminating.get()}, "IPv4", "")) == std::vector<std::string>{"10.0.0.2:80"});
  auto none = slice("ns", "s", "svc", {epPort("", 80)}, {{"10.0.0.4", false}});
  CHECK(services::usableEndpoints(p, {none.get()}, "IPv4", "").empty());
  // A slice port without a number makes its endpoints unusable for that port.
  auto noPort = slice("ns", "s", "svc", {api::EndpointPort{"", api::Protocol::TCP, std::nullopt}}, {{"10.0.0.5"}});
  CHECK(services::usableEndpoints(p, {noPort.get()}, "IPv4", "").empty());
  // The family comes from the slice's addressType.
  auto v6 = slice("ns", "s6", "svc", {epPort("", 80)}, {{"fd00::5"}}, "IPv6");
  CHECK(services::usableEndpoints(p, {v6.get(), mixed.get()}, "IPv6", "").size() == 1);
}

TEST_CASE("endpoint orders are sticky: add appends, swap replaces in place, remove moves the last") {
  render::BackendOrders s;
  CHECK(s.place("ns/a", "o", {"b", "a", "c"}) == render::EndpointOrder{"a", "b", "c"});
  CHECK(s.place("ns/a", "o", {"a", "b", "c", "d"}) == render::EndpointOrder{"a", "b", "c", "d"});
  CHECK(s.place("ns/a", "o", {"a", "x", "c", "d"}) == render::EndpointOrder{"a", "x", "c", "d"});
  CHECK(s.place("ns/a", "o", {"x", "c", "d"}) == render::EndpointOrder{"d", "x", "c"});
  CHECK(s.place("ns/a", "o", {"x", "c", "d", "e", "f"}) == render::EndpointOrder{"d", "x", "c", "e", "f"});
  // A new owner starts from an order listed for one of its destinations (start-up), else sorted.
  s.adoptDestination("backends-tcp|\"10.96.0.1\",80", {"z", "y"});
  CHECK(s.place("ns/b", "p", {"y", "z", "w"}, {"backends-tcp|\"10.96.0.9\",80", "backends-tcp|\"10.96.0.1\",80"}) ==
        render::EndpointOrder{"z", "y", "w"});
  CHECK(s.place("ns/c", "q", {"y", "z"}, {"backends-tcp|\"10.96.0.9\",80"}) == render::EndpointOrder{"y", "z"});
  s.retain("ns/a", {});
  CHECK(s.orders().count("ns/a") == 0);
  CHECK(s.orders().count("ns/b") == 1);
}

TEST_CASE("a packed endpoint order gives back exactly the entries it was packed from") {
  for (const render::EndpointOrder& order :
       {render::EndpointOrder{}, render::EndpointOrder{""}, render::EndpointOrder{"{\"concat\":[\"10.244.2.3\",8080]}"},
        render::EndpointOrder{"b", "", std::string(300, 'x'), std::string("nul\0inside", 10), "a"}})
    CHECK(render::PackedOrder(order).unpacked() == order);
  CHECK_FALSE(render::PackedOrder(render::EndpointOrder{"ab", "c"}) == render::PackedOrder(render::EndpointOrder{"a", "bc"}));
  // The order kept between syncs is the one place returned: the next place starts from it.
  render::BackendOrders s;
  CHECK(s.place("ns/a", "o", {"b", "a", "c"}) == render::EndpointOrder{"a", "b", "c"});
  CHECK(s.orders().at("ns/a").at("o").unpacked() == render::EndpointOrder{"a", "b", "c"});
}

TEST_CASE("golden: a small state renders to exactly unit/golden/small-state.nft") {
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.2.3"}}));
  st.upsertService(service("default", "dns", {"10.96.0.53"}, {port("dns", 53, api::Protocol::UDP)}));
  // The whole transaction a cold sync sends, as nft text.
  checkGolden("unit/golden/small-state.nft", renderText(st, config()));
}

TEST_CASE("headless, ExternalName and other proxies' services get no rules") {
  state::ClusterState st;
  auto headless = service("ns", "headless", {}, {port("", 80)});
  headless->headless = true;
  st.upsertService(headless);
  auto ext = service("ns", "ext", {}, {port("", 80)});
  ext->type = "ExternalName";
  st.upsertService(ext);
  auto other = service("ns", "other", {"10.96.0.9"}, {port("", 80)});
  other->meta.labels["service.kubernetes.io/service-proxy-name"] = "someone-else";
  st.upsertService(other);
  // An empty value is still the label: upstream's `!label` selector leaves the service out.
  auto emptyName = service("ns", "empty", {"10.96.0.8"}, {port("", 80)});
  emptyName->meta.labels["service.kubernetes.io/service-proxy-name"] = "";
  st.upsertService(emptyName);
  std::string text = renderText(st, config());
  CHECK(text.find("ns/") == std::string::npos);
  CHECK(text.find("10.96.0.9") == std::string::npos);
  CHECK(text.find("10.96.0.8") == std::string::npos);
}

TEST_CASE("an incremental render equals a from-scratch render with the same endpoint orders") {
  state::ClusterState st;
  for (int i = 0; i < 30; ++i) {
    std::string name = "svc" + std::to_string(i);
    st.upsertService(service("ns", name, {"10.96.1." + std::to_string(i)}, {port("a", 80), port("b", 53, api::Protocol::UDP)}));
    std::vector<Ep> eps;
    for (int e = 0; e <= i % 5; ++e) eps.push_back({"10.244." + std::to_string(i) + "." + std::to_string(e)});
    st.upsertSlice(slice("ns", name + "-x", name, {epPort("a", 8080), epPort("b", 5353, api::Protocol::UDP)}, eps));
  }
  render::Renderer incremental(config());
  incremental.render(st, nullptr);
  st.changedServices.clear();

  // A burst of changes: endpoints grown past capacity, swapped, removed; services gone and new.
  for (int step = 0; step < 6; ++step) {
    render::BackendOrders before = incremental.slots();
    std::string a = "svc" + std::to_string(step), b = "svc" + std::to_string(step + 10);
    std::vector<Ep> many;
    for (int e = 0; e < 7 + step; ++e) many.push_back({"10.245." + std::to_string(step) + "." + std::to_string(e)});
    st.upsertSlice(slice("ns", a + "-x", a, {epPort("a", 8080), epPort("b", 5353, api::Protocol::UDP)}, many));
    st.deleteService("ns", b);
    st.upsertService(service("ns", "new" + std::to_string(step), {"10.96.2." + std::to_string(step)}, {port("a", 80)}));
    st.upsertSlice(slice("ns", "new" + std::to_string(step) + "-x", "new" + std::to_string(step), {epPort("a", 80)}, {{"10.246.0." + std::to_string(step)}}));
    auto changed = st.changedServices;
    st.changedServices.clear();
    nft::Ruleset inc = incremental.render(st, &changed);

    render::Renderer scratch(config());
    scratch.setSlots(before);
    nft::Ruleset full = scratch.render(st, nullptr);
    checkSameParts(inc, full, step);
    CHECK(scratch.slots() == incremental.slots());
  }
}

TEST_CASE("a pick chain's rule is exactly what nft 1.0.6 lists for it (restart compares them)") {
  // From `nft -j list table` after loading `dnat ip to ip daddr . tcp dport . numgen random mod 2
  // map @backends-tcp` from text: nft folds the `meta l4proto tcp` dependency into `tcp dport`.
  auto chain = render::pickChain(nft::Family::IPv4, {render::KeySpace::Address, api::Protocol::TCP, 2});
  CHECK(chain.name == "pick-tcp-2");
  REQUIRE(chain.rules.size() == 1);
  CHECK(chain.rules[0].exprJson ==
        "[{\"dnat\":{\"family\":\"ip\",\"addr\":{\"map\":{\"key\":{\"concat\":[{\"payload\":{\"protocol\":\"ip\",\"field\":\"daddr\"}},"
        "{\"payload\":{\"protocol\":\"tcp\",\"field\":\"dport\"}},{\"numgen\":{\"mode\":\"random\",\"mod\":2,\"offset\":0}}]},"
        "\"data\":\"@backends-tcp\"}}}}]");
  auto np = render::pickChain(nft::Family::IPv6, {render::KeySpace::LocalNodePort, api::Protocol::UDP, 3});
  CHECK(np.name == "nodeport-pick-local-udp-3");
  CHECK(np.rules[0].text == "dnat ip6 to udp dport . numgen random mod 3 offset 0 map @nodeport-local-backends-udp");
  // The typeof declarations the start-up native call makes.
  auto decls = render::backendsMapDeclarations(nft::Family::IPv4);
  CHECK(decls.size() == 12);
  CHECK(decls[0].name == "backends-tcp");
  CHECK(decls[0].typeofSpec == "ip daddr . tcp dport . numgen random mod 1 : ip daddr . tcp dport");
}

// Defect 3 of issue 11: `nft -f` refuses comments over 128 bytes; "ns/name:port" reaches 191.
TEST_CASE("every comment fits 128 bytes, with maximal names (63-character namespace, name and port name)") {
  const std::string ns(63, 'n'), name(63, 's'), portName(63, 'p');
  state::ClusterState st;
  auto svc = service(ns, name, {"10.96.0.5"}, {port(portName, 80), port(std::string(62, 'p') + "q", 81)});
  svc->type = "LoadBalancer";
  svc->ports[0].nodePort = 30080;
  svc->loadBalancerIngress = {{"1.2.3.4", "", ""}};
  svc->loadBalancerSourceRanges = {"192.168.0.0/16"};
  st.upsertService(svc);
  st.upsertSlice(slice(ns, "s-1", name, {epPort(portName, 8080), epPort(std::string(62, 'p') + "q", 8081)}, {{"10.244.0.5"}}));
  std::string text = renderText(st, config());
  size_t comments = 0;
  std::set<std::string> distinct;
  for (size_t at = text.find("comment \""); at != std::string::npos; at = text.find("comment \"", at + 1)) {
    size_t start = at + 9, end = text.find('"', start);
    REQUIRE(end != std::string::npos);
    std::string c = text.substr(start, end - start);
    CAPTURE(c);
    CHECK(c.size() <= 128);
    ++comments;
    distinct.insert(c);
  }
  CHECK(comments > 4);
  // The two ports' comments share their first 119 bytes and still differ.
  CHECK(distinct.size() >= 3);
  CHECK(text.find("comment \"" + ns + "/" + name + "\"") != std::string::npos);  // 127 bytes: kept whole
}

TEST_CASE("boundedComment: short text unchanged, long text exactly 128 bytes with a stable hash suffix") {
  CHECK(render::boundedComment("ns/web:http") == "ns/web:http");
  CHECK(render::boundedComment(std::string(128, 'x')) == std::string(128, 'x'));
  std::string longer = render::boundedComment(std::string(129, 'x'));
  CHECK(longer.size() == 128);
  CHECK(longer.compare(0, 119, std::string(119, 'x')) == 0);
  CHECK(longer[119] == '~');
  CHECK(render::boundedComment(std::string(129, 'x')) == longer);
  CHECK(render::boundedComment(std::string(130, 'x')) != longer);
}

namespace {

// Services of every kind the render has a path for, `count` of them, with endpoints drawn from
// `seed` (the same seed gives the same state).
state::ClusterState mixedState(int count, int seed) {
  state::ClusterState st;
  for (int i = 0; i < count; ++i) {
    const std::string name = "s" + std::to_string(i);
    const std::string ip = "172.30." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
    std::vector<std::string> ips = {ip};
    if (i % 7 == 0) ips.push_back("fd00:172:30::" + std::to_string(i + 1));
    auto svc = service("ns", name, ips, {port("http", 80), port("dns", 53, api::Protocol::UDP)});
    if (i % 5 == 1) {
      svc->type = "NodePort";
      svc->ports[0].nodePort = 30000 + i;
    }
    if (i % 5 == 2) {
      svc->type = "LoadBalancer";
      svc->ports[0].nodePort = 30000 + i;
      svc->loadBalancerIngress.push_back({"198.51." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1)});
      if (i % 10 == 2) svc->externalTrafficPolicy = "Local", svc->healthCheckNodePort = 32000 + i % 700;
    }
    if (i % 11 == 3) svc->sessionAffinity = "ClientIP";
    if (i % 13 == 4) svc->internalTrafficPolicy = "Local";
    st.upsertService(svc);
    const int eps = (i * 7 + seed) % 19;  // 0..18: no endpoints, the pool, and above it
    std::vector<Ep> v4, v6;
    for (int e = 0; e < eps; ++e) {
      const int host = (e * 3 + seed + i) % 40;
      v4.push_back({"10.244." + std::to_string(host % 4) + "." + std::to_string(host + 2), std::nullopt, std::nullopt,
                    std::nullopt, host % 3 == 0 ? "node-a" : "node-b"});
      v6.push_back({"fd00:10:244::" + std::to_string(host + 2)});
    }
    st.upsertSlice(slice("ns", name + "-1", name, {epPort("http", 8080), epPort("dns", 5353, api::Protocol::UDP)}, v4));
    if (i % 7 == 0)
      st.upsertSlice(slice("ns", name + "-6", name, {epPort("http", 8080), epPort("dns", 5353, api::Protocol::UDP)},
                           v6, "IPv6"));
  }
  return st;
}

}  // namespace

TEST_CASE("a render of many services on two threads is the render on one: the table, the plan and the sticky slot orders") {
  const int services = int(render::Renderer::kThreadedRenderMinServices) * 3;
  render::Renderer one(config()), two(config());
  one.setRenderThreads(1);
  two.setRenderThreads(2);
  for (int seed : {0, 5, 11}) {  // later seeds: endpoints change, the orders stick from the render before
    INFO("seed " << seed);
    state::ClusterState st = mixedState(services, seed);
    const nft::Ruleset& a = one.render(st, nullptr);
    const nft::Ruleset& b = two.render(st, nullptr);
    checkSameParts(b, a, seed);
    CHECK(nft::planReconcile({}, b).txn.toText() == nft::planReconcile({}, a).txn.toText());
    CHECK(two.slots() == one.slots());
  }
  // An incremental render of a batch of changes as big: two threads too, the same result.
  state::ClusterState changed = mixedState(services, 17);
  std::set<std::string> keys;
  for (const auto& [key, svc] : changed.services) keys.insert(key);
  const nft::Ruleset& a = one.render(changed, &keys);
  const nft::Ruleset& b = two.render(changed, &keys);
  checkSameParts(b, a, 17);
  CHECK(two.slots() == one.slots());
  REQUIRE(two.touchedOwners() != nullptr);  // it was incremental
  CHECK(*two.touchedOwners() == *one.touchedOwners());
  // Fewer services than the threshold: one thread, the same result.
  state::ClusterState small = mixedState(20, 3);
  CHECK(nft::planReconcile({}, two.render(small, nullptr)).txn.toText() ==
        nft::planReconcile({}, one.render(small, nullptr)).txn.toText());
  CHECK(two.slots() == one.slots());
}
