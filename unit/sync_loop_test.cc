// The sync loop's timing decisions against the fake kernel and a fake clock: coalescing changes
// for min-sync-period, the forced sync every sync-period, backoff after failures, the has-synced
// gate, and what observers (the /healthz state) see.
#include <doctest/doctest.h>

#include "nft/fake.h"
#include "pkg/health/proxy_health.h"
#include "pkg/sync/loop.h"
#include "pkg/sync/state_sync_target.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using namespace std::chrono_literals;

namespace {

struct FakeSource : source::Source {
  bool start() override { return true; }
  int fd() const override { return -1; }
  bool processEvents() override { return false; }
  bool hasSynced() const override { return synced; }
  std::string pending() const override { return synced ? "" : "Services"; }
  std::map<std::string, sync::WallTime> takeTriggerTimes() override {
    auto out = std::move(triggers);
    triggers.clear();
    return out;
  }
  std::string describe() const override { return "fake source"; }
  bool synced = true;
  std::map<std::string, sync::WallTime> triggers;
};

struct Recorder : sync::SyncObserver {
  void queued(sync::WallTime) override { ++queuedCalls; }
  void synced(const sync::SyncReport& r) override {
    reports.push_back({r.stats.ok, r.consecutiveFailures, r.retryIn, r.triggerTimes,
                       r.changed ? std::optional<std::set<std::string>>(*r.changed) : std::nullopt});
  }
  struct Seen {
    bool ok;
    int failures;
    std::chrono::nanoseconds retryIn;
    std::map<std::string, sync::WallTime> triggers;
    std::optional<std::set<std::string>> changed;
  };
  int queuedCalls = 0;
  std::vector<Seen> reports;
};

// A daemon's loop over one service, on a fake clock and the fake kernel.
struct Rig {
  explicit Rig(sync::LoopTimings t = {1s, 30s})
      : renderer(nodeConfig()), syncer(renderer, kernel), target(clock, st, renderer, syncer, nullptr),
        loop(clock, src, target, t) {
    loop.addObserver(&seen);
    st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
    st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  }
  static services::NodeConfig nodeConfig() {
    services::NodeConfig cfg;
    cfg.nodeName = "node-a";
    return cfg;
  }
  // A source event: the endpoint of `svc` moves to `ip`.
  void endpointMoves(const std::string& svc, const std::string& ip) {
    st.upsertSlice(slice("default", svc + "-1", svc, {epPort("http", 8080)}, {{ip}}));
    loop.changed();
  }
  // Steps the loop every `tick` for `d`, as the driver would.
  void run(std::chrono::nanoseconds d, std::chrono::nanoseconds tick = 10ms) {
    for (auto end = clock.now() + d; clock.now() < end; clock.advance(tick)) loop.step();
  }
  sync::FakeClock clock;
  FakeSource src;
  state::ClusterState st;
  render::Renderer renderer;
  nft::FakeRunner kernel;
  sync::Syncer syncer;
  sync::StateSyncTarget target;
  sync::SyncLoop loop;
  Recorder seen;
};

}  // namespace

TEST_CASE("sync loop: nothing is synced before the source has listed everything") {
  Rig r;
  r.src.synced = false;
  r.run(20s, 100ms);
  CHECK(r.loop.syncs() == 0);
  CHECK(r.kernel.commits == 0);
  CHECK(r.kernel.tables.empty());
  r.src.synced = true;
  r.loop.step();
  CHECK(r.loop.syncs() == 1);
  CHECK(r.kernel.commits == 1);
  CHECK_FALSE(r.loop.dirty());
}

TEST_CASE("sync loop: changes within min-sync-period are coalesced into one sync") {
  Rig r;
  r.st.upsertService(service("default", "db", {"10.96.0.20"}, {port("http", 5432)}));
  r.loop.step();  // the first sync, at once
  REQUIRE(r.loop.syncs() == 1);
  auto first = r.clock.now();
  r.clock.advance(100ms);
  r.endpointMoves("web", "10.244.1.3");
  sync::SteadyTime due = r.loop.step();
  CHECK(due == first + 1s);  // min-sync-period after the last sync, not after the change
  r.clock.advance(100ms);
  r.endpointMoves("db", "10.244.1.9");
  r.run(790ms);  // up to first + 990ms
  CHECK(r.loop.syncs() == 1);
  r.run(20ms);
  CHECK(r.loop.syncs() == 2);
  REQUIRE(r.seen.reports.size() == 2);
  REQUIRE(r.seen.reports[1].changed.has_value());
  CHECK(*r.seen.reports[1].changed == std::set<std::string>{"default/db", "default/web"});
  CHECK(r.seen.queuedCalls == 2);
}

TEST_CASE("sync loop: with min-sync-period 0, a change is synced by the next step even while time runs") {
  Rig r({0s, 30s});
  r.clock.readStep = 1us;  // every clock read moves time on
  r.loop.step();
  REQUIRE(r.loop.syncs() == 1);
  r.clock.advance(5s);
  r.endpointMoves("web", "10.244.1.3");
  r.loop.step();
  CHECK(r.loop.syncs() == 2);
  CHECK_FALSE(r.loop.dirty());
}

TEST_CASE("sync loop: with no change, a sync is forced every sync-period") {
  Rig r;
  r.loop.step();
  REQUIRE(r.loop.syncs() == 1);
  auto first = r.clock.now();
  CHECK(r.loop.step() == first + 30s);
  r.run(29s, 500ms);
  CHECK(r.loop.syncs() == 1);
  r.run(1s + 10ms, 500ms);
  CHECK(r.loop.syncs() == 2);
  CHECK(r.seen.reports.back().ok);
}

TEST_CASE("sync loop: failures back off doubling up to sync-period; a success resets it") {
  Rig r;
  r.loop.step();
  REQUIRE(r.seen.reports.back().ok);
  r.kernel.failAlways = true;
  r.clock.advance(2s);
  r.endpointMoves("web", "10.244.1.3");
  std::vector<int64_t> retriesMs;
  std::vector<std::chrono::nanoseconds> gaps;
  auto last = r.clock.now();
  size_t before = r.loop.syncs();
  while (retriesMs.size() < 9) {
    r.loop.step();
    if (r.loop.syncs() != before) {
      before = r.loop.syncs();
      REQUIRE_FALSE(r.seen.reports.back().ok);
      retriesMs.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(r.seen.reports.back().retryIn).count());
      gaps.push_back(r.clock.now() - last);
      last = r.clock.now();
    }
    r.clock.advance(10ms);
  }
  CHECK(retriesMs == std::vector<int64_t>{500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000});
  CHECK(r.loop.consecutiveFailures() == 9);
  // Each retry waits min-sync-period plus the backoff (capped by the forced sync at sync-period).
  CHECK(gaps[1] >= 1500ms);
  CHECK(gaps[1] < 1520ms);
  CHECK(gaps[8] >= 30s);
  CHECK(gaps[8] < 30s + 20ms);
  CHECK(r.seen.reports.back().failures == 9);

  r.kernel.failAlways = false;
  r.run(31s);
  CHECK(r.seen.reports.back().ok);
  CHECK(r.loop.backoff() == 0ns);
  CHECK(r.loop.consecutiveFailures() == 0);
  CHECK_FALSE(r.loop.dirty());
}

TEST_CASE("sync loop: trigger times are reported by the successful sync that covers them") {
  Rig r;
  r.loop.step();
  r.kernel.failAlways = true;
  r.src.triggers["default/web"] = r.clock.wallNow() - 3s;
  r.endpointMoves("web", "10.244.1.3");
  r.run(2s);
  REQUIRE_FALSE(r.seen.reports.back().ok);
  CHECK(r.seen.reports.back().triggers.empty());
  r.kernel.failAlways = false;
  r.run(2s);
  REQUIRE(r.seen.reports.back().ok);
  CHECK(r.seen.reports.back().triggers.size() == 1);
  CHECK(r.seen.reports.back().triggers.count("default/web") == 1);
}

TEST_CASE("sync loop: /healthz turns unhealthy once a change waits 2 x sync-period, healthy after the next sync") {
  Rig r;
  health::ProxyHealth h(r.clock, 60s, {"IPv4", "IPv6"});
  r.loop.addObserver(&h);
  CHECK(h.status().healthy);  // starting up
  CHECK(h.status().status.empty());
  r.loop.step();
  REQUIRE(h.status().status.size() == 2);
  CHECK(h.status().healthy);

  r.kernel.failAlways = true;
  r.clock.advance(5s);
  r.endpointMoves("web", "10.244.1.3");
  r.run(59s, 100ms);
  CHECK(h.status().healthy);  // late, not yet too late
  r.run(1s + 100ms, 100ms);
  auto s = h.status();
  CHECK_FALSE(s.healthy);
  CHECK_FALSE(s.status.at("IPv4").healthy);
  CHECK_FALSE(s.status.at("IPv6").healthy);
  CHECK(health::livezResponse(h, r.clock).status == 503);

  r.kernel.failAlways = false;
  r.run(31s, 100ms);
  CHECK(h.status().healthy);
  CHECK(health::livezResponse(h, r.clock).status == 200);
}

TEST_CASE("proxy health: /healthz is 503 while the Node is being deleted or tainted for deletion; /livez is not") {
  sync::FakeClock clock;
  health::ProxyHealth h(clock, 60s, {"IPv4"});
  sync::SyncReport ok;
  ok.stats.ok = true;
  ok.finished = clock.wallNow();
  h.synced(ok);

  api::Node node;
  node.meta.name = "node-a";
  CHECK(health::nodeEligible(&node));
  CHECK(health::nodeEligible(nullptr));
  node.taintKeys = {"node.kubernetes.io/unschedulable", "ToBeDeletedByClusterAutoscaler"};
  CHECK_FALSE(health::nodeEligible(&node));
  node.taintKeys.clear();
  node.deletionTimestamp = "2025-12-03T00:00:00Z";
  CHECK_FALSE(health::nodeEligible(&node));

  h.setNodeEligible(false);
  auto hz = health::healthzResponse(h, clock);
  CHECK(hz.status == 503);
  CHECK(hz.body ==
        R"({"lastUpdated":"2025-12-03T00:00:00Z","currentTime":"2025-12-03T00:00:00Z","nodeEligible":false,)"
        R"("healthy":true,"status":{"IPv4":{"lastUpdated":"2025-12-03T00:00:00Z","healthy":true}}})");
  auto lz = health::livezResponse(h, clock);
  CHECK(lz.status == 200);
  CHECK(lz.body.find("nodeEligible") == std::string::npos);
  bool nosniff = false;
  for (const auto& [k, v] : lz.headers) nosniff |= k == "X-Content-Type-Options" && v == "nosniff";
  CHECK(nosniff);

  h.setNodeEligible(true);
  clock.advance(1500ms);
  hz = health::healthzResponse(h, clock);
  CHECK(hz.status == 200);
  // Healthy: lastUpdated says "now", as upstream's does for compatibility.
  CHECK(hz.body.rfind(R"({"lastUpdated":"2025-12-03T00:00:01.5Z","currentTime":"2025-12-03T00:00:01.5Z","nodeEligible":true,)", 0) == 0);
}

TEST_CASE("proxy health: Go time format") {
  CHECK(health::goTimeJson(sync::WallTime{}) == "0001-01-01T00:00:00Z");
  CHECK(health::goTimeJson(sync::WallTime{} + std::chrono::seconds(1764720000) + std::chrono::microseconds(120)) ==
        "2025-12-03T00:00:00.00012Z");
}

TEST_CASE("change counts: every applied change is counted; pending until a sync takes them") {
  Rig r;
  r.loop.step();
  const auto& c = r.st.changeCounts;
  CHECK(c.pendingServices.empty());
  CHECK(c.pendingEndpoints.empty());
  CHECK(c.serviceChanges == 1);
  CHECK(c.endpointChanges == 1);
  r.st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));  // equal: no change
  r.endpointMoves("web", "10.244.1.3");
  r.endpointMoves("web", "10.244.1.4");
  CHECK(c.endpointChanges == 3);
  CHECK(c.pendingEndpoints == std::set<std::string>{"default/web"});
  CHECK(c.serviceChanges == 1);
  r.run(1s + 20ms);  // min-sync-period after the first sync
  REQUIRE(r.loop.syncs() == 2);
  CHECK(c.pendingEndpoints.empty());
  CHECK(c.endpointChanges == 3);
}
