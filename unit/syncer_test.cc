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
