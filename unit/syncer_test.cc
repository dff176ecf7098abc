// The syncer against the fake kernel: what it tells consumers that follow its syncs (the
// health-check index) about the services each sync covered.
#include <doctest/doctest.h>

#include "nft/fake.h"
#include "pkg/sync/isolation.h"
#include "pkg/sync/planner.h"
#include "pkg/sync/syncer.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

TEST_CASE("syncer: lastChanges names an incremental sync's services, and is null after start-up and after a failure") {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  render::Renderer renderer(cfg);
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));

  REQUIRE(syncer.sync(st).ok);
  CHECK(syncer.lastChanges() == nullptr);  // start-up: from scratch

  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.3"}}));
  REQUIRE(syncer.sync(st).ok);
  REQUIRE(syncer.lastChanges() != nullptr);
  CHECK(*syncer.lastChanges() == std::set<std::string>{"default/web"});

  // A service the kernel refuses is left out: consumers must look at every service again.
  st.upsertService(service("default", "db", {"10.96.0.20"}, {port("", 5432)}));
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.1.5"}}));
  kernel.rejectServiceElements = {"default/db"};
  REQUIRE(syncer.sync(st).ok);
  CHECK(syncer.lastChanges() == nullptr);
  // A refusal the checks do not reproduce (it went away) is committed again at once.
  kernel.rejectServiceElements.clear();
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.4"}}));
  kernel.failNext = true;
  REQUIRE(syncer.sync(st).ok);
  REQUIRE(syncer.lastChanges() != nullptr);
  CHECK(*syncer.lastChanges() == std::set<std::string>{"default/web"});
}

// Defect 5 of issue 11: one service the kernel refuses must not hold up the others.
namespace {

services::NodeConfig isolationConfig() {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  return cfg;
}

// Whether any map of `table` holds an element of service `key` ("ns/name"), by its comment.
bool hasServiceElement(nft::FakeRunner& k, const char* table, const std::string& key) {
  for (const auto& [name, set] : k.tables[table].sets)
    for (const auto& [elementKey, comment] : set.comments)
      if (comment == key || comment.rfind(key + ":", 0) == 0) return true;
  return false;
}

bool hasBackend(nft::FakeRunner& k, const std::string& ip) {
  for (const auto& [name, set] : k.tables["ip kube-proxy"].sets)
    for (const auto& [key, value] : set.elements)
      if (name.rfind("backends-", 0) == 0 && value.first.find(ip) != std::string::npos) return true;
  return false;
}

// default/web at 10.96.0.10:80, its one slice's endpoints at `ips`.
void putWeb(state::ClusterState& st, std::vector<std::string> ips) {
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  std::vector<Ep> endpoints;
  for (auto& ip : ips) endpoints.push_back({std::move(ip)});
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, endpoints));
}

}  // namespace

TEST_CASE("syncer: a service the kernel refuses is found by bisection and left out; the others keep updating") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  kernel.rejectServiceElements = {"default/bad"};
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  for (const char* name : {"a", "bad", "c", "d", "e"}) {
    st.upsertService(service("default", name, {std::string("10.96.0.") + std::to_string(name[0] % 50)}, {port("http", 80)}));
    st.upsertSlice(slice("default", std::string(name) + "-1", name, {epPort("http", 8080)}, {{"10.244.1.2"}}));
  }
  auto s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(s.rejectedServices == 1);
  CHECK(syncer.rejectedServices() == std::set<std::string>{"default/bad"});
  CHECK(syncer.failureCounts().rejectedTransactions == 1);
  CHECK(syncer.failureCounts().serviceRejections == 1);
  CHECK(kernel.checks > 1);
  for (const char* name : {"a", "c", "d", "e"}) CHECK(hasServiceElement(kernel, "ip kube-proxy", std::string("default/") + name));
  CHECK_FALSE(hasServiceElement(kernel, "ip kube-proxy", "default/bad"));
  auto retry = syncer.retryIn();
  REQUIRE(retry.has_value());
  CHECK(*retry > std::chrono::nanoseconds(0));
  CHECK(*retry < std::chrono::seconds(1));

  // Another service changes: programmed at once, incrementally, the refused one still left out.
  st.upsertSlice(slice("default", "a-1", "a", {epPort("http", 8080)}, {{"10.244.1.9"}}));
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK_FALSE(s.full);
  CHECK(hasBackend(kernel, "10.244.1.9"));
  CHECK(syncer.rejectedServices() == std::set<std::string>{"default/bad"});

  // Refused again on its retry: the backoff doubles.
  st.upsertSlice(slice("default", "bad-1", "bad", {epPort("http", 8080)}, {{"10.244.1.7"}}));
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(syncer.failureCounts().serviceRejections == 2);
  CHECK(*syncer.retryIn() > std::chrono::milliseconds(600));

  // The kernel takes it now: its next change programs it.
  kernel.rejectServiceElements.clear();
  st.upsertSlice(slice("default", "bad-1", "bad", {epPort("http", 8080)}, {{"10.244.1.8"}}));
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(s.rejectedServices == 0);
  CHECK(syncer.rejectedServices().empty());
  CHECK(hasServiceElement(kernel, "ip kube-proxy", "default/bad"));
  CHECK(hasBackend(kernel, "10.244.1.8"));
  CHECK_FALSE(syncer.retryIn().has_value());
}

TEST_CASE("syncer: a change taken by a sync whose commit fails reaches the kernel with the next one; the store's journal is not written back") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  putWeb(st, {"10.244.1.2"});
  REQUIRE(syncer.sync(st).ok);
  kernel.failAlways = true;
  putWeb(st, {"10.244.1.9"});
  CHECK_FALSE(syncer.sync(st).ok);
  CHECK(st.changedServices.empty());  // the syncer keeps what it took
  CHECK_FALSE(hasBackend(kernel, "10.244.1.9"));
  kernel.failAlways = false;
  REQUIRE(syncer.sync(st).ok);
  CHECK(hasBackend(kernel, "10.244.1.9"));
  CHECK_FALSE(hasBackend(kernel, "10.244.1.2"));
}

TEST_CASE("store: takeChanges hands the journal out as a value and starts an empty one") {
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.1.5"}}));
  auto node = std::make_shared<api::Node>();
  node->meta.name = "node-a";
  st.setNode(node);
  state::ClusterState::Changes taken = st.takeChanges();
  CHECK(taken.services == std::set<std::string>{"default/db", "default/web"});
  CHECK(taken.node);
  CHECK_FALSE(taken.serviceCIDRs);
  state::ClusterState::Changes again = st.takeChanges();
  CHECK(again.services.empty());
  CHECK_FALSE(again.node);
  CHECK(st.services.size() == 1);  // the state itself stays
}

// --dry-run prints the start-up declarations, then this plan.
TEST_CASE("planner: the dry run's plan adds, after the start-up declarations, what a start-up sync commits") {
  state::ClusterState st;
  putWeb(st, {"10.244.1.2", "10.244.1.3"});
  render::Renderer dryRenderer(isolationConfig());
  sync::PlannedSync dry = sync::renderAndPlan(dryRenderer, st, {}, sync::PlanBase::declaredOnly());
  CHECK(dry.kind == sync::PlanKind::Reconcile);
  CHECK_FALSE(dry.plan.needsFull);
  nft::FakeRunner loaded;
  REQUIRE(loaded.declareStatic(dryRenderer.skeleton()).ok);
  auto r = loaded.commit(dry.plan.txn);
  REQUIRE_MESSAGE(r.ok, r.error);

  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  REQUIRE(syncer.sync(st).ok);
  REQUIRE(loaded.tables.size() == kernel.tables.size());
  for (const auto& [name, t] : kernel.tables) {
    INFO(name);
    const nft::FakeRunner::FakeTable& d = loaded.tables[name];
    CHECK(d.chains == t.chains);
    CHECK(d.rules == t.rules);
    REQUIRE(d.sets.size() == t.sets.size());
    for (const auto& [setName, set] : t.sets) CHECK(d.sets.at(setName).elements == set.elements);
  }
  CHECK(hasBackend(loaded, "10.244.1.3"));
}

TEST_CASE("syncer: a transaction refused without any service's rules keeps the old ruleset and goes full") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  kernel.rejectChains = {"services"};  // a base-part chain
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  CHECK_FALSE(syncer.sync(st).ok);
  CHECK(syncer.nextIsFull());
  CHECK(syncer.lastChanges() == nullptr);
  CHECK(kernel.commits == 0);
  kernel.rejectChains.clear();
  CHECK(syncer.sync(st).ok);
}

TEST_CASE("syncer: only the families the kernel runs nftables for are programmed (upstream: single-stack fallback)") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  kernel.unsupportedFamilies = {nft::Family::IPv6};  // any IPv6 operation would fail the commit
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  st.upsertService(service("default", "dual", {"10.96.0.7", "fd00:96::7"}, {port("p", 80)}));
  st.upsertSlice(slice("default", "dual-v4", "dual", {epPort("p", 80)}, {{"10.244.0.7"}}));
  st.upsertSlice(slice("default", "dual-v6", "dual", {epPort("p", 80)}, {{"fd00:244::7"}}, "IPv6"));
  auto s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(syncer.families() == std::set<nft::Family>{nft::Family::IPv4});
  CHECK(hasServiceElement(kernel, "ip kube-proxy", "default/dual"));
  CHECK(kernel.tables.count("ip6 kube-proxy") == 0);
  st.upsertSlice(slice("default", "dual-v4", "dual", {epPort("p", 80)}, {{"10.244.0.8"}}));
  REQUIRE(syncer.sync(st).ok);
  CHECK(hasBackend(kernel, "10.244.0.8"));
  CHECK(s.rejectedServices == 0);
}

TEST_CASE("findRejected: bisection finds exactly the refused candidates in O(b log n) checks") {
  std::set<std::string> candidates;
  for (int i = 0; i < 64; ++i) candidates.insert("svc ns/s" + std::to_string(100 + i));
  const std::set<std::string> badOnes = {"svc ns/s107", "svc ns/s150"};
  int calls = 0;
  auto bad = sync::findRejected(candidates, [&](const std::set<std::string>& excluded) -> std::optional<std::string> {
    ++calls;
    for (const auto& b : badOnes)
      if (!excluded.count(b)) return "refused " + b;
    return std::nullopt;
  });
  CHECK(bad.size() == 2);
  CHECK(bad.count("svc ns/s107") == 1);
  CHECK(bad.count("svc ns/s150") == 1);
  CHECK(bad.at("svc ns/s107") == "refused svc ns/s107");
  CHECK(calls <= 2 * 2 * 7 + 1);
  CHECK(sync::findRejected(candidates, [](const std::set<std::string>&) { return std::optional<std::string>(); }).empty());
}

TEST_CASE("syncer: a start-up over another layout's table (a base chain on another priority, map elements "
          "pointing at its chains) converts it in one commit: `flush table` leaves sets alone, so they are flushed") {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  nft::FakeRunner kernel;
  {
    render::Renderer renderer(cfg);
    sync::Syncer first(renderer, kernel);
    REQUIRE(first.sync(st).ok);
  }
  // Turn the committed table into "someone else's": upstream's v1.33 filter-input priority, a chain
  // of its own that service-ips points into, and an element of a set we do not have.
  auto& t = kernel.tables.at("ip kube-proxy");
  REQUIRE(t.chains.count("filter-input"));
  t.chains["filter-input"] = nft::Hook{"filter", "input", -110};
  t.chains["service-ULMVA6XW-default/web/tcp/http"] = std::nullopt;
  t.rules["service-ULMVA6XW-default/web/tcp/http"];
  auto& serviceIps = t.sets.at("service-ips").elements;
  REQUIRE(serviceIps.empty());  // web is counted by its slots (pick_chains.h), not dispatched by a verdict
  REQUIRE(t.sets.at("backends-tcp").elements.size() == 1);
  serviceIps[R"({"concat":["10.96.0.10","tcp",80]})"] = {R"({"goto":{"target":"service-ULMVA6XW-default/web/tcp/http"}})",
                                                         {"service-ULMVA6XW-default/web/tcp/http"}};

  render::Renderer renderer(cfg);
  sync::Syncer restarted(renderer, kernel);
  auto stats = restarted.sync(st);
  REQUIRE(stats.ok);
  CHECK(stats.full);
  const auto& after = kernel.tables.at("ip kube-proxy");
  CHECK_FALSE(after.chains.count("service-ULMVA6XW-default/web/tcp/http"));
  CHECK(after.chains.at("filter-input") == nft::Hook{"filter", "input", 0});
  CHECK(after.sets.at("service-ips").elements.empty());
  CHECK(after.sets.at("backends-tcp").elements.size() == 1);
  CHECK(restarted.sync(st).ops == 0);
}

// Defect 6 of issue 11: a periodic sync checks a cheap kernel fingerprint (the generation, our
// tables' chain and set counts) and goes full when our tables were changed from outside.
TEST_CASE("syncer: a periodic sync whose kernel fingerprint differs goes full and repairs; another table's commit does not") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  REQUIRE(syncer.sync(st).ok);
  auto& table = kernel.tables["ip kube-proxy"];
  const size_t chains = table.chains.size();

  // Nobody committed: the generation alone says so.
  int reads = kernel.fingerprintReads;
  auto s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK_FALSE(s.full);
  CHECK(kernel.fingerprintReads == reads + 1);

  // Someone committed to another table: the generation moved, our counts did not.
  ++kernel.gen;
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK_FALSE(s.full);
  CHECK(syncer.fingerprintMismatches() == 0);

  // Someone deleted one of our chains (the pick chain web uses) and its references.
  std::string victim;
  for (const auto& [name, hook] : table.chains)
    if (name.rfind("pick-", 0) == 0) victim = name;
  REQUIRE_FALSE(victim.empty());
  table.chains.erase(victim);
  table.rules.erase(victim);
  ++kernel.gen;
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(s.full);
  CHECK(syncer.fingerprintMismatches() == 1);
  CHECK(kernel.tables["ip kube-proxy"].chains.count(victim) == 1);
  CHECK(kernel.tables["ip kube-proxy"].chains.size() == chains);

  // A kernel that cannot be asked (no descriptor left) changes nothing: incremental as before.
  kernel.fingerprintFails = true;
  ++kernel.gen;
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK_FALSE(s.full);
}

TEST_CASE("syncer: a sync with changes to make does not read the fingerprint first") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  REQUIRE(syncer.sync(st).ok);
  ++kernel.gen;  // would be checked by a periodic sync
  int reads = kernel.fingerprintReads;
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  auto s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK_FALSE(s.full);
  CHECK(kernel.fingerprintReads == reads);  // none: the commit's result carries the generation after it
}

// Outside damage (the table monitor's report, or a fingerprint mismatch) is repaired against a
// listing of the kernel: an intact table costs no operation. A flush-and-refill there made every
// false alarm a full rewrite, whose own event storm raised the next alarm (10k services: every
// change became a 4 s sync).
TEST_CASE("syncer: a repair after outside damage changes only what differs from the kernel") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.1.3"}}));
  st.upsertService(service("default", "db", {"10.96.0.20"}, {port("", 5432)}));
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.1.5"}}));
  REQUIRE(syncer.sync(st).ok);

  syncer.kernelChanged();  // a false alarm: nothing was touched
  auto s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(s.plan == sync::SyncStats::Plan::Reconcile);
  CHECK(s.ops == 0);
  CHECK_FALSE(syncer.nextIsFull());

  // Someone deleted one element of ours: the repair adds it back and touches nothing else.
  auto& table = kernel.tables["ip kube-proxy"];
  std::string setName, key;
  for (const auto& [name, set] : table.sets)
    for (const auto& [k, comment] : set.comments)
      if (comment.rfind("default/db", 0) == 0 && setName.empty()) setName = name, key = k;
  REQUIRE_FALSE(setName.empty());
  const auto intact = table.sets[setName].elements;
  table.sets[setName].elements.erase(key);
  table.sets[setName].comments.erase(key);
  syncer.kernelChanged();
  s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(s.plan == sync::SyncStats::Plan::Reconcile);
  CHECK(s.ops == 1);
  CHECK(kernel.tables["ip kube-proxy"].sets[setName].elements == intact);
}

TEST_CASE("syncer: each change reports the generation it made; a sync without operations reports none") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  std::vector<uint32_t> own;
  kernel.onOwnCommit([&own](uint32_t g) { own.push_back(g); });
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  REQUIRE(syncer.sync(st).ok);
  REQUIRE(own.size() == 2);  // the start-up declarations, then the rules
  CHECK(own.front() + 1 == own.back());
  CHECK(own.back() == kernel.gen);
  REQUIRE(syncer.sync(st).ok);  // nothing to do: nothing committed
  CHECK(own.size() == 2);
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  REQUIRE(syncer.sync(st).ok);
  REQUIRE(own.size() == 3);
  CHECK(own.back() == own[1] + 1);
}

// A repair or a restart that declared again made a commit of its own each time; in a container
// the table monitor took it for outside damage and the repair repeated every second (issue 23).
TEST_CASE("syncer: start-up declarations are made once; a repair or a restart on an intact table commits nothing") {
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  state::ClusterState st;
  auto web = service("default", "web", {"10.96.0.10"}, {port("http", 80)});
  web->sessionAffinity = "ClientIP";  // its data-path set is declared at start-up too
  st.upsertService(web);
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}, {"10.244.1.3"}}));
  {
    sync::Syncer syncer(renderer, kernel);
    REQUIRE(syncer.sync(st).ok);
    CHECK(kernel.declarations == 1);
    const uint32_t settled = kernel.gen;
    syncer.kernelChanged();  // as the table monitor says after an event it cannot account for
    auto s = syncer.sync(st);
    REQUIRE(s.ok);
    CHECK(s.plan == sync::SyncStats::Plan::Reconcile);
    CHECK(s.ops == 0);
    CHECK(kernel.declarations == 1);
    CHECK(kernel.gen == settled);
  }
  const uint32_t settled = kernel.gen;
  render::Renderer restarted(isolationConfig());
  sync::Syncer syncer(restarted, kernel);
  auto s = syncer.sync(st);
  REQUIRE(s.ok);
  CHECK(s.ops == 0);
  CHECK(kernel.declarations == 1);
  CHECK(kernel.gen == settled);

  // A typeof map gone from the kernel: declared again, and only then.
  std::string typeofMap;
  for (const nft::Table& t : restarted.skeleton().tables)
    for (const nft::SetDecl& d : t.sets)
      if (!d.typeofSpec.empty() && typeofMap.empty()) typeofMap = d.name;
  REQUIRE_FALSE(typeofMap.empty());
  REQUIRE(kernel.tables["ip kube-proxy"].sets.erase(typeofMap) == 1);
  syncer.kernelChanged();
  REQUIRE(syncer.sync(st).ok);
  CHECK(kernel.declarations == 2);
  CHECK(kernel.tables["ip kube-proxy"].sets.count(typeofMap) == 1);
}

TEST_CASE("syncer: its listener hears each refused service with the kernel's error, its return, and a failed sync") {
  struct Heard : sync::SyncerListener {
    std::vector<std::string> said;
    void serviceRefused(const std::string& s, const std::string& e) override { said.push_back("refused " + s + ": " + e); }
    void serviceProgrammedAgain(const std::string& s) override { said.push_back("programmed " + s); }
    void syncFailed(const std::string& e) override { said.push_back("failed: " + e); }
  } heard;
  render::Renderer renderer(isolationConfig());
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  syncer.setListener(&heard);
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertService(service("default", "db", {"10.96.0.20"}, {port("", 5432)}));
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.1.5"}}));
  kernel.rejectServiceElements = {"default/db"};
  REQUIRE(syncer.sync(st).ok);
  REQUIRE(heard.said.size() == 1);
  CHECK(heard.said[0].rfind("refused default/db: ", 0) == 0);
  CHECK(heard.said[0].size() > std::string("refused default/db: ").size());  // the kernel's words
  kernel.rejectServiceElements.clear();
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.1.6"}}));  // changed: retried now
  REQUIRE(syncer.sync(st).ok);
  CHECK(heard.said.back() == "programmed default/db");
  kernel.failAlways = true;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 81)}));
  CHECK_FALSE(syncer.sync(st).ok);
  CHECK(heard.said.back().rfind("failed: ", 0) == 0);
  syncer.setListener(nullptr);  // back to none: nothing to call
  CHECK_FALSE(syncer.sync(st).ok);
  CHECK(heard.said.size() == 3);
}
