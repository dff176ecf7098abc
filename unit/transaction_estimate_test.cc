// The syncer's announcement of a cold start's commit (pkg/sync/transaction_estimate.h) and when
// it is made.
#include <doctest/doctest.h>

#include "nft/fake.h"
#include "pkg/sync/syncer.h"
#include "pkg/sync/transaction_estimate.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

TEST_CASE("estimate: a slot per ready endpoint and port, a dispatch element per service port") {
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80), port("https", 443)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080), epPort("https", 8443)},
                       {{"10.244.1.2"}, {"10.244.1.3"}, {"10.244.1.4", false}}));  // the third is not ready
  CHECK(sync::operationsToFill(st, {}) == 2 + 2 * 2);

  // Headless and ExternalName services have no rules: their endpoints count nothing.
  auto headless = service("default", "db", {}, {port("", 5432)});
  headless->headless = true;
  st.upsertService(headless);
  st.upsertSlice(slice("default", "db-1", "db", {epPort("", 5432)}, {{"10.244.2.1"}, {"10.244.2.2"}}));
  auto alias = service("default", "ext", {}, {port("", 443)});
  alias->type = "ExternalName";
  st.upsertService(alias);
  CHECK(sync::operationsToFill(st, {}) == 6);

  // What the tables hold already is not to be added.
  nft::ListedTable t;
  t.exists = true;
  t.sets["backends-tcp"].elements = {{"a", "x"}, {"b", "y"}};
  CHECK(sync::operationsToFill(st, {t}) == 4);
  t.sets["service-ips"].elements = {{"c", ""}, {"d", ""}, {"e", ""}, {"f", ""}, {"g", ""}};
  CHECK(sync::operationsToFill(st, {t}) == 0);
}

TEST_CASE("syncer: a cold start into empty tables announces its commit; changes and a restart over the table do not") {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  render::Renderer renderer(cfg);
  nft::FakeRunner kernel;
  state::ClusterState st;
  // 2 500 services x 4 endpoints: 12 500 operations, over Runner::kBigCommitOps.
  for (int i = 0; i < 2500; ++i) {
    const std::string name = "s" + std::to_string(i);
    const std::string vip = "10.96." + std::to_string(i / 250) + "." + std::to_string(1 + i % 250);
    st.upsertService(service("default", name, {vip}, {port("http", 80)}));
    std::vector<Ep> eps;
    for (int j = 0; j < 4; ++j)
      eps.push_back({"10.244." + std::to_string(i / 60) + "." + std::to_string(1 + (i % 60) * 4 + j)});
    st.upsertSlice(slice("default", name + "-1", name, {epPort("http", 8080)}, eps));
  }
  {
    sync::Syncer syncer(renderer, kernel);
    REQUIRE(syncer.sync(st).ok);
    REQUIRE(kernel.announced.size() == 1);
    CHECK(kernel.announced[0] == 2500 * 5);
    CHECK(kernel.lastOps >= kernel.announced[0]);  // the estimate counts low

    st.upsertSlice(slice("default", "s7-1", "s7", {epPort("http", 8080)}, {{"10.244.200.1"}}));
    REQUIRE(syncer.sync(st).ok);
    CHECK(kernel.announced.size() == 1);  // an incremental change
  }
  render::Renderer restarted(cfg);
  sync::Syncer again(restarted, kernel);
  REQUIRE(again.sync(st).ok);
  CHECK(kernel.announced.size() == 1);  // the table holds the state already
}
