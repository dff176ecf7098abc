// /healthz and /livez state on a fake clock, in every state upstream's ProxyHealthServer and its
// proxier give it (pkg/proxy/healthcheck/proxy_health.go, healthcheck_test.go): starting up,
// synced, a change queued for less and for more than the timeout, failed syncs with and without
// an earlier success, the Node being deleted; and the families this node serves.
#include <doctest/doctest.h>

#include "pkg/health/proxy_health.h"

using namespace kpn;
using namespace std::chrono_literals;

namespace {

sync::SyncReport report(bool ok, const sync::FakeClock& clock) {
  sync::SyncReport r;
  r.stats.ok = ok;
  r.finished = clock.wallNow();
  return r;
}

// 2025-12-03T00:00:00Z (the fake clock's start) plus d, as Go prints it.
std::string at(std::chrono::seconds d) { return health::goTimeJson(sync::FakeClock().wallNow() + d); }

}  // namespace

TEST_CASE("proxy health: starting up is healthy, and a change queued before the first sync attempt does not count") {
  sync::FakeClock clock;
  health::ProxyHealth h(clock, 60s, std::vector<std::string>{"IPv4", "IPv6"});
  h.queued(clock.wallNow());  // the initial listing's events: upstream's informers have not synced yet
  clock.advance(10min);  // a slow API server
  auto s = h.status();
  CHECK(s.healthy);
  CHECK(s.status.empty());
  CHECK(health::livezResponse(h, clock).status == 200);
  CHECK(health::healthzResponse(h, clock).body ==
        R"({"lastUpdated":")" + at(600s) + R"(","currentTime":")" + at(600s) + R"(","nodeEligible":true,"healthy":true})");
}

TEST_CASE("proxy health: a change queued longer than the timeout without any successful sync is unhealthy") {
  // Upstream counts the start as an update of each family ("in case Sync() never succeeds").
  sync::FakeClock clock;
  health::ProxyHealth h(clock, 60s, std::vector<std::string>{"IPv4", "IPv6"});
  clock.advance(5s);
  h.synced(report(false, clock));  // the first sync fails
  CHECK(h.status().healthy);       // nothing waits for a sync yet: upstream's retries are not queued changes
  clock.advance(100s);
  h.synced(report(false, clock));
  CHECK(h.status().healthy);

  h.queued(clock.wallNow());  // a change arrives (t = 105 s)
  for (int i = 0; i < 5; ++i) {  // the retries keep failing
    clock.advance(11s);
    h.synced(report(false, clock));
  }
  clock.advance(4s);  // waited 59 s
  CHECK(h.status().healthy);
  clock.advance(1s);  // 60 s: too late
  auto s = h.status();
  CHECK_FALSE(s.healthy);
  REQUIRE(s.status.size() == 2);
  CHECK_FALSE(s.status.at("IPv4").healthy);
  CHECK_FALSE(s.status.at("IPv6").healthy);
  CHECK(s.reason == "IPv4, IPv6: a change has waited 60.0s for a successful sync (limit 60.0s); "
                    "none since the start at " + at(0s));
  auto hz = health::healthzResponse(h, clock);
  CHECK(hz.status == 503);
  CHECK(hz.body == R"({"lastUpdated":")" + at(0s) + R"(","currentTime":")" + at(165s) +
                       R"(","nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":")" + at(0s) +
                       R"(","healthy":false},"IPv6":{"lastUpdated":")" + at(0s) + R"(","healthy":false}}})");
  CHECK(health::livezResponse(h, clock).status == 503);

  h.synced(report(true, clock));  // at last
  s = h.status();
  CHECK(s.healthy);
  CHECK(s.reason.empty());
  CHECK(s.status.at("IPv4").lastUpdated == clock.wallNow());
  CHECK(health::livezResponse(h, clock).status == 200);
}

TEST_CASE("proxy health: synced, then a change late by less and by more than the timeout (upstream's sequence)") {
  sync::FakeClock clock;
  health::ProxyHealth h(clock, 10s, std::vector<std::string>{"IPv4", "IPv6"});
  h.synced(report(true, clock));
  auto synced = clock.wallNow();
  CHECK(health::healthzResponse(h, clock).status == 200);

  clock.advance(25s);  // no change queued: healthy however long
  auto ok = health::healthzResponse(h, clock);
  CHECK(ok.status == 200);
  // While healthy lastUpdated is "now", the families' their own last update.
  CHECK(ok.body == R"({"lastUpdated":")" + at(25s) + R"(","currentTime":")" + at(25s) +
                       R"(","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":")" + at(0s) +
                       R"(","healthy":true},"IPv6":{"lastUpdated":")" + at(0s) + R"(","healthy":true}}})");

  h.queued(clock.wallNow());
  clock.advance(10s - 1ns);  // one nanosecond short of the timeout
  CHECK(h.status().healthy);
  h.queued(clock.wallNow());  // a later change keeps the oldest one's time
  clock.advance(1ns);
  CHECK_FALSE(h.status().healthy);
  clock.advance(15s);
  auto late = health::livezResponse(h, clock);
  CHECK(late.status == 503);
  // Unhealthy: lastUpdated is the last successful sync; no nodeEligible on /livez.
  CHECK(late.body == R"({"lastUpdated":")" + health::goTimeJson(synced) + R"(","currentTime":")" + at(50s) +
                         R"(","healthy":false,"status":{"IPv4":{"lastUpdated":")" + at(0s) +
                         R"(","healthy":false},"IPv6":{"lastUpdated":")" + at(0s) + R"(","healthy":false}}})");
  CHECK(h.status().reason == "IPv4, IPv6: a change has waited 25.0s for a successful sync (limit 10.0s); "
                             "the last one was at " + at(0s));

  clock.advance(5s);
  h.synced(report(false, clock));  // a failed sync changes nothing
  CHECK_FALSE(h.status().healthy);
  h.synced(report(true, clock));
  clock.advance(5s);
  CHECK(h.status().healthy);
  CHECK(h.status().status.at("IPv6").lastUpdated == clock.wallNow() - 5s);
}

TEST_CASE("proxy health: the Node being deleted or tainted for deletion turns /healthz 503, never /livez") {
  sync::FakeClock clock;
  health::ProxyHealth h(clock, 60s, std::vector<std::string>{"IPv4"});
  h.synced(report(true, clock));
  for (bool eligible : {false, true}) {
    h.setNodeEligible(eligible);
    auto hz = health::healthzResponse(h, clock);
    CHECK(hz.status == (eligible ? 200 : 503));
    CHECK(hz.body == R"({"lastUpdated":")" + at(0s) + R"(","currentTime":")" + at(0s) + R"(","nodeEligible":)" +
                         (eligible ? "true" : "false") +
                         R"(,"healthy":true,"status":{"IPv4":{"lastUpdated":")" + at(0s) + R"(","healthy":true}}})");
    CHECK(health::livezResponse(h, clock).status == 200);
  }
  // Both at once: still 503, the body says both.
  h.setNodeEligible(false);
  h.queued(clock.wallNow());
  clock.advance(2min);
  auto hz = health::healthzResponse(h, clock);
  CHECK(hz.status == 503);
  CHECK(hz.body.find(R"("nodeEligible":false,"healthy":false)") != std::string::npos);
  CHECK(health::livezResponse(h, clock).status == 503);
}

TEST_CASE("proxy health: only the families this node serves are reported, learnt from the first sync") {
  sync::FakeClock clock;
  std::set<nft::Family> served;  // what the syncer knows: nothing before its first sync
  health::ProxyHealth h(clock, 60s, [&served] { return health::familyNames(served); });
  CHECK(h.status().status.empty());
  served = {nft::Family::IPv4};  // the kernel refused the ip6 family at the start-up probe
  h.synced(report(true, clock));
  auto s = h.status();
  CHECK(s.status.size() == 1);
  CHECK(s.status.count("IPv4") == 1);
  CHECK(health::healthzResponse(h, clock).body.find("IPv6") == std::string::npos);

  CHECK(health::familyNames({nft::Family::IPv4, nft::Family::IPv6}) == std::vector<std::string>{"IPv4", "IPv6"});
  CHECK(health::familyNames({nft::Family::IPv6}) == std::vector<std::string>{"IPv6"});
}
