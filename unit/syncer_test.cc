// The syncer against the fake kernel: what it tells consumers that follow its syncs (the
// health-check index) about the services each sync covered.
#include <doctest/doctest.h>

#include "nft/fake.h"
#include "pkg/sync/syncer.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

TEST_CASE("syncer: lastChanges names an incremental sync's services, and is null after start-up and after a failure") {
  render::NodeConfig cfg;
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

  st.upsertService(service("default", "db", {"10.96.0.20"}, {port("", 5432)}));
  kernel.failNext = true;
  CHECK_FALSE(syncer.sync(st).ok);
  CHECK(syncer.lastChanges() == nullptr);
  REQUIRE(syncer.sync(st).ok);  // the retry is full: what it covered is everything
  CHECK(syncer.lastChanges() == nullptr);
}

TEST_CASE("syncer: a start-up over another layout's table (a base chain on another priority, map elements "
          "pointing at its chains) converts it in one commit: `flush table` leaves sets alone, so they are flushed") {
  render::NodeConfig cfg;
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
  REQUIRE(serviceIps.size() == 1);
  auto ours = *serviceIps.begin();
  serviceIps.begin()->second = {R"({"goto":{"target":"service-ULMVA6XW-default/web/tcp/http"}})",
                                {"service-ULMVA6XW-default/web/tcp/http"}};

  render::Renderer renderer(cfg);
  sync::Syncer restarted(renderer, kernel);
  auto stats = restarted.sync(st);
  REQUIRE(stats.ok);
  CHECK(stats.full);
  const auto& after = kernel.tables.at("ip kube-proxy");
  CHECK_FALSE(after.chains.count("service-ULMVA6XW-default/web/tcp/http"));
  CHECK(after.chains.at("filter-input") == nft::Hook{"filter", "input", 0});
  CHECK(after.sets.at("service-ips").elements == std::map<std::string, std::pair<std::string, std::vector<std::string>>>{ours});
  CHECK(restarted.sync(st).ops == 0);
}
