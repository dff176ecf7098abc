#include <doctest/doctest.h>

#include "nft/diff.h"
#include "nft/fake.h"
#include "pkg/render/render.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;
using nft::Kind;
using nft::Verb;

namespace {

services::NodeConfig smallConfig() {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  cfg.clusterCidrV4 = net::parseCidr("10.244.0.0/16");
  return cfg;
}

state::ClusterState twoServices() {
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.2.3"}}));
  st.upsertService(service("default", "db", {"10.96.0.20"}, {port("", 5432)}));
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.1.2"}}));
  return st;
}

struct Pipeline : FakePipeline {
  Pipeline() : FakePipeline(smallConfig()) {}
};

// The fake replaces its tables on every commit: look them up afresh after each sync.
nft::FakeRunner::FakeTable& v4(Pipeline& p) { return p.kernel.tables["ip kube-proxy"]; }

// The pick chains of a pool (the search for a destination's count) are all in the table, whole.
bool pooled(nft::FakeRunner::FakeTable& t, render::KeySpace space, api::Protocol proto) {
  for (const nft::Chain& c : render::protocolPickChains(nft::Family::IPv4, {space, proto}))
    if (!t.chains.count(c.name) || t.rules[c.name].size() != c.rules.size()) return false;
  return true;
}
// No chain of the pool's search is left.
bool noSearchChains(nft::FakeRunner::FakeTable& t, render::KeySpace space, api::Protocol proto) {
  for (const nft::Chain& c : render::protocolPickChains(nft::Family::IPv4, {space, proto}))
    if (t.chains.count(c.name)) return false;
  return true;
}

size_t count(const nft::Transaction& t, Verb v, Kind k) {
  size_t n = 0;
  for (const auto& op : t.ops()) n += op.verb == v && op.kind == k;
  return n;
}

bool onlyTouches(const nft::Transaction& t, const std::string& needle) {
  for (const auto& op : t.ops()) {
    if (op.kind == Kind::Chain || op.kind == Kind::Rule) {
      // The shared pick chains belong to no service.
      if (op.name.find(needle) == std::string::npos && op.name.find("pick") == std::string::npos) return false;
    } else if (op.kind == Kind::Element && op.name.rfind("backends-", 0) != 0 &&
               op.element().comment().find(needle) == std::string::npos && op.name != "hairpin") {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("a sync with no changes produces an empty transaction") {
  Pipeline p;
  auto st = twoServices();
  auto first = p.sync(st);
  CHECK(first.txn.size() > 20);
  auto second = p.sync(st);
  CHECK(second.txn.empty());
  // Rewriting an object with identical content is not a change either.
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  CHECK(st.changedServices.empty());
  CHECK(p.sync(st).txn.empty());
}

TEST_CASE("adding one endpoint adds its slot and nothing else: no rule, no chain, no verdict") {
  Pipeline p;
  auto st = twoServices();
  // Other services with three and two endpoints: both pick chains stay in use.
  st.upsertService(service("default", "api", {"10.96.0.30"}, {port("", 443)}));
  st.upsertSlice(slice("default", "api-1", "api", {epPort("", 8443)}, {{"10.244.5.1"}, {"10.244.5.2"}, {"10.244.5.3"}}));
  st.upsertService(service("default", "admin", {"10.96.0.31"}, {port("", 443)}));
  st.upsertSlice(slice("default", "admin-1", "admin", {epPort("", 8443)}, {{"10.244.5.1"}, {"10.244.5.2"}}));
  p.sync(st);
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.2.3"}, {"10.244.3.4"}}));
  auto plan = p.sync(st);
  CHECK(onlyTouches(plan.txn, "web"));
  CHECK(count(plan.txn, Verb::Flush, Kind::Chain) == 0);
  CHECK(count(plan.txn, Verb::Add, Kind::Rule) == 0);
  // Slot 2 and its hairpin pair: the slots are the count (pick_chains.h). No verdict element
  // changes, so the kernel has no jump graph to validate.
  CHECK(count(plan.txn, Verb::Delete, Kind::Element) == 0);
  CHECK(count(plan.txn, Verb::Add, Kind::Element) == 2);
  CHECK(plan.txn.size() == 2);
  CHECK(v4(p).sets["backends-tcp"].elements.count("{\"concat\":[\"10.96.0.10\",80,2]}") == 1);
  CHECK(v4(p).sets["service-ips"].elements.empty());
  // Every count in the pool (render::kPooledCounts) has its leaf in the search already: elements only.
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)},
                       {{"10.244.1.2"}, {"10.244.2.3"}, {"10.244.3.4"}, {"10.244.3.5"}}));
  plan = p.sync(st);
  CHECK(count(plan.txn, Verb::Add, Kind::Chain) == 0);
  CHECK(count(plan.txn, Verb::Add, Kind::Rule) == 0);
  CHECK(plan.txn.size() == 2);
  // A count above the pool that nobody had before adds its pick chain (one rule) and a dispatch
  // verdict in the same transaction, and its last user takes it away again.
  std::vector<Ep> many;
  for (uint32_t i = 0; i <= render::kPooledCounts; ++i) many.push_back({"10.244.4." + std::to_string(i + 1)});
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, many));
  plan = p.sync(st);
  const std::string above = "pick-tcp-" + std::to_string(render::kPooledCounts + 1);
  CHECK(count(plan.txn, Verb::Add, Kind::Chain) == 1);
  CHECK(count(plan.txn, Verb::Add, Kind::Rule) == 1);
  CHECK(v4(p).chains.count(above) == 1);
  CHECK(v4(p).sets["service-ips"].elements.at("{\"concat\":[\"10.96.0.10\",\"tcp\",80]}").first ==
        "{\"goto\":{\"target\":\"" + above + "\"}}");
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.2.3"}}));
  plan = p.sync(st);
  CHECK(count(plan.txn, Verb::Delete, Kind::Chain) == 1);
  CHECK(v4(p).chains.count(above) == 0);
  CHECK(v4(p).sets["service-ips"].elements.empty());
}

TEST_CASE("the pool of pick rules comes with a key space's first destination and goes with its last") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  CHECK(pooled(v4(p), render::KeySpace::Address, api::Protocol::TCP));
  CHECK(v4(p).rules["pick"].size() == 1);  // the entry rule of TCP
  CHECK(noSearchChains(v4(p), render::KeySpace::Address, api::Protocol::UDP));  // no UDP destination
  CHECK(v4(p).chains.count("pick-local-tcp") == 0);
  // Before any element of its map: the kernel's walk over the map at binding time finds nothing.
  st.upsertService(service("default", "dns", {"10.96.0.53"}, {port("dns", 53, api::Protocol::UDP)}));
  st.upsertSlice(slice("default", "dns-1", "dns", {epPort("dns", 5353, api::Protocol::UDP)}, {{"10.244.6.1"}}));
  auto plan = p.sync(st);
  // pick-udp and the chains of its search
  CHECK(count(plan.txn, Verb::Add, Kind::Chain) ==
        render::protocolPickChains(nft::Family::IPv4, {render::KeySpace::Address, api::Protocol::UDP}).size());
  CHECK(pooled(v4(p), render::KeySpace::Address, api::Protocol::UDP));
  CHECK(count(plan.txn, Verb::Add, Kind::Set) == 0);
  size_t firstElement = plan.txn.size(), lastBindingRule = 0;
  for (size_t i = 0; i < plan.txn.size(); ++i) {
    const auto& op = plan.txn.ops()[i];
    if (op.kind == Kind::Element && op.name == "backends-udp") firstElement = std::min(firstElement, i);
    if (op.kind == Kind::Rule && (op.name.rfind("pick-udp", 0) == 0 || op.name == "pick")) lastBindingRule = i;
  }
  CHECK(lastBindingRule < firstElement);
  CHECK(v4(p).rules["pick"].size() == 2);
  st.deleteService("default", "dns");
  p.sync(st);
  CHECK(noSearchChains(v4(p), render::KeySpace::Address, api::Protocol::UDP));
  st.deleteService("default", "web");
  st.deleteService("default", "db");
  p.sync(st);
  // What stays: the four empty entry chains the services chain jumps to.
  for (const auto& [name, c] : v4(p).chains)
    if (name.find("pick") != std::string::npos) CHECK(v4(p).rules[name].empty());
}

TEST_CASE("swapping one endpoint for another is element-only") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.9.9"}}));
  auto plan = p.sync(st);
  CHECK(count(plan.txn, Verb::Add, Kind::Rule) == 0);
  // backend value replaced (delete + add of the key), hairpin pair of the old one out, new one in
  CHECK(count(plan.txn, Verb::Delete, Kind::Element) == 2);
  CHECK(count(plan.txn, Verb::Add, Kind::Element) == 2);
}

TEST_CASE("removing an endpoint moves at most one other and keeps shared hairpin pairs") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  // 10.244.1.2 also backs db, so its hairpin pair must survive web losing it.
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.2.3"}}));
  auto plan = p.sync(st);
  CHECK(onlyTouches(plan.txn, "web"));
  for (const auto& op : plan.txn.ops()) CHECK(op.name != "hairpin");
  CHECK(count(plan.txn, Verb::Add, Kind::Rule) == 0);
  CHECK(pooled(v4(p), render::KeySpace::Address, api::Protocol::TCP));  // no user has 2 now, but it is pooled
  CHECK(v4(p).sets["hairpin"].elements.count("{\"concat\":[\"10.244.1.2\",\"10.244.1.2\"]}") == 1);
  // Once db drops it too, the pair goes.
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.7.7"}}));
  p.sync(st);
  CHECK(v4(p).sets["hairpin"].elements.count("{\"concat\":[\"10.244.1.2\",\"10.244.1.2\"]}") == 0);
}

TEST_CASE("a service losing all endpoints is rejected instead of dispatched, and comes back") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  st.deleteSlice("default", "web", "web-1");
  p.sync(st);
  CHECK(v4(p).sets["backends-tcp"].elements.count("{\"concat\":[\"10.96.0.10\",80,0]}") == 0);
  CHECK(v4(p).sets["no-endpoint-services"].elements.count("{\"concat\":[\"10.96.0.10\",\"tcp\",80]}") == 1);
  CHECK(v4(p).sets["service-ips"].elements.count("{\"concat\":[\"10.96.0.10\",\"tcp\",80]}") == 0);
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  p.sync(st);
  CHECK(v4(p).sets["backends-tcp"].elements.count("{\"concat\":[\"10.96.0.10\",80,0]}") == 1);
  CHECK(v4(p).sets["no-endpoint-services"].elements.empty());
}

TEST_CASE("deleting a service removes every element it owned; the pooled pick rules stay") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  st.deleteService("default", "web");
  p.sync(st);
  auto& t = v4(p);
  CHECK(pooled(t, render::KeySpace::Address, api::Protocol::TCP));
  CHECK(t.sets["service-ips"].elements.empty());
  CHECK(t.sets["cluster-ips"].elements.count("\"10.96.0.10\"") == 0);
  size_t backends = 0;
  for (auto& [name, s] : t.sets)
    if (name.rfind("backends-", 0) == 0) backends += s.elements.size();
  CHECK(backends == 1);  // db's single endpoint
}

TEST_CASE("the fake kernel refuses what the kernel refuses, atomically") {
  nft::FakeRunner k;
  nft::Transaction ok;
  ok.addTable(nft::Family::IPv4, "t");
  ok.addChain(nft::Family::IPv4, "t", "a", std::nullopt);
  REQUIRE(k.commit(ok).ok);

  nft::Transaction badJump;
  badJump.addChain(nft::Family::IPv4, "t", "b", std::nullopt);
  badJump.addRule(nft::Family::IPv4, "t", "a", nft::makeRule({nft::st::jump("missing")}));
  CHECK_FALSE(k.commit(badJump).ok);
  CHECK(k.tables["ip t"].chains.count("b") == 0);  // nothing of the failed transaction stayed

  nft::Transaction badLookup;
  badLookup.addRule(nft::Family::IPv4, "t", "a", nft::makeRule({nft::st::matchSet(nft::ex::payload("ip", "daddr"), "nope")}));
  CHECK_FALSE(k.commit(badLookup).ok);

  nft::Transaction setAndMap;
  setAndMap.addSet(nft::Family::IPv4, "t", nft::SetDecl{"m", {"ipv4_addr"}, "verdict", ""});
  setAndMap.addElement(nft::Family::IPv4, "t", nft::verdictElement("m", nft::ex::addr("1.2.3.4"), "a"));
  REQUIRE(k.commit(setAndMap).ok);

  nft::Transaction busy;
  busy.deleteChain(nft::Family::IPv4, "t", "a");  // still the target of m's element
  CHECK_FALSE(k.commit(busy).ok);

  nft::Transaction rekey;
  rekey.addChain(nft::Family::IPv4, "t", "c", std::nullopt);
  rekey.addElement(nft::Family::IPv4, "t", nft::verdictElement("m", nft::ex::addr("1.2.3.4"), "c"));
  CHECK_FALSE(k.commit(rekey).ok);  // re-adding a key with a new value

  nft::Transaction missing;
  missing.deleteElement(nft::Family::IPv4, "t", nft::verdictElement("m", nft::ex::addr("9.9.9.9"), "a"));
  CHECK_FALSE(k.commit(missing).ok);
}

TEST_CASE("restart: reconciling with tables that already match changes nothing") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  std::vector<nft::ListedTable> listed = p.listBoth();

  render::Renderer fresh(smallConfig());
  fresh.adoptSlots(listed);
  auto rs = fresh.render(st, nullptr);
  CHECK(fresh.slots() == p.renderer.slots());
  auto plan = nft::planReconcile(listed, rs);
  CHECK_FALSE(plan.needsFull);
  CHECK(plan.txn.empty());
}

TEST_CASE("restart: a dual-stack NodePort's local endpoints keep their slots in each family") {
  // The NodePort's slots are keyed by the port alone in both families' maps: adopting them by that
  // key alone gave the IPv4 set the IPv6 listing's order (no endpoint in common: renumbered).
  state::ClusterState st;
  auto svc = service("default", "np", {"10.96.0.30", "fd00:96::30"}, {port("http", 80)});
  svc->type = "NodePort";
  svc->externalTrafficPolicy = "Local";
  svc->ports[0].nodePort = 30930;
  st.upsertService(svc);
  auto endpoints = [&](std::vector<int> hosts) {
    std::vector<Ep> v4, v6;
    for (int h : hosts) {
      v4.push_back({"10.244.1." + std::to_string(h), true, true, false, "node-a"});
      v6.push_back({"fd00:244::" + std::to_string(h), true, true, false, "node-a"});
    }
    st.upsertSlice(slice("default", "np-4", "np", {epPort("http", 8080)}, v4));
    st.upsertSlice(slice("default", "np-6", "np", {epPort("http", 8080)}, v6, "IPv6"));
  };
  endpoints({1, 2, 3});
  Pipeline p;
  p.sync(st);
  endpoints({2, 3});  // the last moves into the hole: slots 3, 2, not sorted any more
  p.sync(st);
  std::vector<nft::ListedTable> listed = p.listBoth();
  render::Renderer fresh(smallConfig());
  fresh.adoptSlots(listed);
  auto plan = nft::planReconcile(listed, fresh.render(st, nullptr));
  CHECK_FALSE(plan.needsFull);
  CHECK_MESSAGE(plan.txn.empty(), plan.txn.toText());
  CHECK(fresh.slots() == p.renderer.slots());
}

TEST_CASE("restart: reconciling repairs only what differs") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  auto* t = &v4(p);
  t->sets["hairpin"].elements.clear();                       // lost elements
  t->rules["services"].clear();                              // a flushed chain
  t->chains["service-default/gone/tcp/80"] = std::nullopt;  // a stale chain
  t->rules["service-default/gone/tcp/80"];
  std::vector<nft::ListedTable> listed = p.listBoth();
  render::Renderer fresh(smallConfig());
  fresh.adoptSlots(listed);
  auto plan = nft::planReconcile(listed, fresh.render(st, nullptr));
  REQUIRE(p.kernel.commit(plan.txn).ok);
  CHECK(count(plan.txn, Verb::Add, Kind::Element) == 2);  // the two hairpin pairs
  CHECK(count(plan.txn, Verb::Add, Kind::Rule) == 14);    // the services chain's fourteen rules
  CHECK(count(plan.txn, Verb::Delete, Kind::Chain) == 1);
  CHECK(v4(p).sets["hairpin"].elements.size() == 2);
}

TEST_CASE("a full resync flushes and refills without deleting the tables and drops stale objects") {
  Pipeline p;
  auto st = twoServices();
  p.sync(st);
  v4(p).chains["service-default/gone/tcp/80"] = std::nullopt;
  v4(p).rules["service-default/gone/tcp/80"];
  std::vector<nft::ListedTable> listed = p.listBoth();
  auto rs = p.renderer.render(st, nullptr);
  auto plan = nft::planFull(listed, rs);
  CHECK(count(plan.txn, Verb::Delete, Kind::Table) == 0);
  CHECK(count(plan.txn, Verb::Flush, Kind::Table) == 2);
  REQUIRE(p.kernel.commit(plan.txn).ok);
  CHECK(v4(p).chains.count("service-default/gone/tcp/80") == 0);
  CHECK(v4(p).chains.count("pick-tcp") == 1);
  CHECK(v4(p).sets["backends-tcp"].elements.size() == 3);  // web's two slots, db's one
}

TEST_CASE("upgrade: the chain-per-service layout's endpoint orders are adopted and its objects replaced in one plan") {
  // What the previous layout left: a service chain with `numgen random mod 2 offset 4` over a
  // backends shard whose slots hold web's endpoints in an order a fresh render would not choose.
  nft::ListedTable old;
  old.exists = true;
  nft::Rule dnat = nft::makeRule({nft::st::match(nft::ex::meta("l4proto"), "==", nft::ex::symbol("tcp")),
                                  nft::st::dnatMap(nft::Family::IPv4, nft::ex::numgenRandom(2, 4), "backends-tcp-1")},
                                 "default/web:http");
  old.chains["service-default/web/tcp/http"].rules.push_back(nft::listedRule(dnat.exprJson, dnat.comment));
  nft::ListedSet& shard = old.sets["backends-tcp-1"];
  shard.isMap = true;
  shard.keyType = {"integer"};
  shard.elements["4"] = "{\"concat\":[\"10.244.2.3\",8080]}";
  shard.elements["5"] = "{\"concat\":[\"10.244.1.2\",8080]}";
  nft::ListedSet& dispatch = old.sets["service-ips"];
  dispatch.isMap = true;
  dispatch.keyType = {"ipv4_addr", "inet_proto", "inet_service"};
  dispatch.dataType = "verdict";
  dispatch.elements["{\"concat\":[\"10.96.0.10\",\"tcp\",80]}"] = "{\"goto\":{\"target\":\"service-default/web/tcp/http\"}}";
  REQUIRE(old.chains["service-default/web/tcp/http"].rules[0].numgenDnat ==
          nft::ListedNumgenDnat{"backends-tcp-1", 2, 4});

  render::Renderer fresh(smallConfig());
  fresh.adoptSlots({old, nft::ListedTable{}});
  auto st = twoServices();
  const nft::Ruleset& rs = fresh.render(st, nullptr);
  CHECK(fresh.slots().orders().at("default/web").at("ip all/tcp/http").unpacked() ==
        render::EndpointOrder{"{\"concat\":[\"10.244.2.3\",8080]}", "{\"concat\":[\"10.244.1.2\",8080]}"});
  auto plan = nft::planReconcile({old, nft::ListedTable{}}, rs);
  bool chainGone = false, shardGone = false, verdictGone = false, counted = false;  // counted: web's slot 1
  for (const auto& op : plan.txn.ops()) {
    chainGone |= op.verb == Verb::Delete && op.kind == Kind::Chain && op.name == "service-default/web/tcp/http";
    shardGone |= op.verb == Verb::Delete && op.kind == Kind::Set && op.name == "backends-tcp-1";
    verdictGone |= op.verb == Verb::Delete && op.kind == Kind::Element && op.name == "service-ips";
    counted |= op.verb == Verb::Add && op.kind == Kind::Element && op.name == "backends-tcp" &&
               op.element().key() == "{\"concat\":[\"10.96.0.10\",80,1]}";
  }
  CHECK(chainGone);
  CHECK(shardGone);
  CHECK(verdictGone);
  CHECK(counted);
}

TEST_CASE("the element index points at a committed copy and keeps its Part alive") {
  auto part = std::make_shared<nft::Part>();
  part->elements.push_back(nft::setElement("hairpin", nft::ex::concat({nft::ex::addr("10.244.1.2"), nft::ex::addr("10.244.1.2")})));
  const std::string key(part->elements[0].key());
  nft::ElementIndex idx;
  idx.add("ip|kube-proxy|hairpin", part->elements[0], part);
  auto other = std::make_shared<nft::Part>(*part);  // a second owner of the same element
  idx.add("ip|kube-proxy|hairpin", other->elements[0], other);
  part.reset();  // the first owner's Part is replaced: the index still holds it
  const nft::IndexedElement* r = idx.find("ip|kube-proxy|hairpin", key);
  REQUIRE(r != nullptr);
  CHECK(r->count == 2);
  CHECK(r->element->key() == key);
  // Re-pointing to another copy re-keys the entry with that copy's key.
  idx.set("ip|kube-proxy|hairpin", nft::ElementRef{1, &other->elements[0], other});
  r = idx.find("ip|kube-proxy|hairpin", key);
  REQUIRE(r != nullptr);
  CHECK(r->count == 1);
  CHECK(r->element == &other->elements[0]);
  idx.erase("ip|kube-proxy|hairpin", key);
  CHECK(idx.find("ip|kube-proxy|hairpin", key) == nullptr);
  CHECK(idx.size() == 0);
}
