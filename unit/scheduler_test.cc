// Schedulers: the names (ours and IPVS's), the Maglev table's shares and its disruption, and what
// the evaluator sees of round-robin and source-hash services.
#include <doctest/doctest.h>

#include <map>

#include "pkg/config/node_config.h"
#include "pkg/render/maglev.h"
#include "pkg/render/scheduler.h"
#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using render::Scheduler;

TEST_CASE("scheduler: our names and IPVS's, warnings for what nftables cannot do, unknown ones") {
  CHECK(render::parseScheduler("").scheduler == Scheduler::Random);
  CHECK(render::parseScheduler("random").warning.empty());
  CHECK(render::parseScheduler("rr").scheduler == Scheduler::RoundRobin);
  CHECK(render::parseScheduler("round-robin").scheduler == Scheduler::RoundRobin);
  auto wrr = render::parseScheduler("wrr");
  CHECK(wrr.scheduler == Scheduler::RoundRobin);
  CHECK(wrr.warning.find("weights") != std::string::npos);
  for (const char* h : {"sh", "mh", "source-hash"}) {
    CHECK(render::parseScheduler(h).scheduler == Scheduler::SourceHash);
    CHECK(render::parseScheduler(h).warning.empty());
  }
  for (const char* r : {"lc", "wlc", "lblc", "lblcr", "dh", "sed", "nq"}) {
    auto c = render::parseScheduler(r);
    CHECK(c.known);
    CHECK(c.scheduler == Scheduler::Random);
    CHECK(c.warning.find(std::string("\"") + r + "\"") != std::string::npos);
    CHECK(c.warning.find("nftables") != std::string::npos);
  }
  CHECK_FALSE(render::parseScheduler("fastest").known);

  // The annotation wins over the node's default; an unknown one keeps the default with one line.
  auto svc = service("ns", "web", {"10.96.0.1"}, {port("http", 80)});
  CHECK(render::serviceScheduler(*svc, Scheduler::SourceHash) == Scheduler::SourceHash);
  svc->meta.annotations[render::kSchedulerAnnotation] = "rr";
  CHECK(render::serviceScheduler(*svc, Scheduler::SourceHash) == Scheduler::RoundRobin);
  svc->meta.annotations[render::kSchedulerAnnotation] = "bogus";
  std::string warning;
  CHECK(render::serviceScheduler(*svc, Scheduler::SourceHash, &warning) == Scheduler::SourceHash);
  CHECK(warning.find("bogus") != std::string::npos);

  // --scheduler / ipvs.scheduler into the node config.
  config::ProxyConfig pc;
  render::NodeConfig nc;
  std::vector<std::string> warnings;
  pc.ipvs.scheduler = "mh";
  REQUIRE_FALSE(config::toNodeConfig(pc, nc, &warnings));
  CHECK(nc.scheduler == Scheduler::SourceHash);
  CHECK(warnings.empty());
  pc.ipvs.scheduler = "nonsense";
  REQUIRE_FALSE(config::toNodeConfig(pc, nc, &warnings));
  CHECK(nc.scheduler == Scheduler::Random);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("nonsense") != std::string::npos);
}

namespace {

std::vector<std::string> names(int n, int from = 0) {
  std::vector<std::string> v;
  for (int i = from; i < from + n; ++i) v.push_back("10.0.0." + std::to_string(i) + " . 8080");
  return v;
}

}  // namespace

TEST_CASE("maglev: every endpoint gets about M/N slots, whatever the order of the list") {
  for (int n : {1, 2, 3, 5, 10, 25}) {
    auto eps = names(n);
    uint32_t m = render::maglevTableSize(eps.size());
    auto table = render::maglevTable(eps, m);
    REQUIRE(table.size() == m);
    std::map<uint32_t, int> share;
    for (uint32_t t : table) share[t]++;
    CHECK(share.size() == static_cast<size_t>(n));
    for (const auto& [ep, count] : share) {
      CHECK(count >= static_cast<int>(m / n) - 1);
      CHECK(count <= static_cast<int>(m / n) + 2);
    }
    auto reversed = eps;
    std::reverse(reversed.begin(), reversed.end());
    auto again = render::maglevTable(reversed, m);
    for (uint32_t s = 0; s < m; ++s) CHECK(reversed[again[s]] == eps[table[s]]);
  }
}

TEST_CASE("maglev: removing or adding one endpoint moves about 1/N of the slots, not almost all") {
  auto five = names(5);
  const uint32_t m = render::maglevTableSize(5);
  auto before = render::maglevTable(five, m);
  auto four = five;
  four.erase(four.begin() + 2);
  auto after = render::maglevTable(four, m);
  int movedOthers = 0, others = 0;
  for (uint32_t s = 0; s < m; ++s) {
    const std::string& was = five[before[s]];
    if (was == five[2]) continue;  // its slots must move
    ++others;
    if (four[after[s]] != was) ++movedOthers;
  }
  MESSAGE("slots of the remaining endpoints that moved: " << movedOthers << " of " << others);
  CHECK(movedOthers * 4 <= others);  // at most 1/4 (typically a few percent)
  auto six = names(6);
  auto grown = render::maglevTable(six, m);
  int moved = 0;
  for (uint32_t s = 0; s < m; ++s) moved += six[grown[s]] != five[before[s]];
  CHECK(moved <= static_cast<int>(m) / 6 + static_cast<int>(m) / 10);  // ~1/6, plus a little churn
}

TEST_CASE("behaviour: round-robin and source-hash services still reach every endpoint, each with its share") {
  World w;
  auto svc = service("ns", "rr", {"172.30.0.20"}, {port("http", 80)});
  svc->meta.annotations[render::kSchedulerAnnotation] = "round-robin";
  w.st.upsertService(svc);
  auto hashed = service("ns", "sh", {"172.30.0.21"}, {port("http", 80)});
  hashed->meta.annotations[render::kSchedulerAnnotation] = "source-hash";
  w.st.upsertService(hashed);
  for (const char* name : {"rr", "sh"})
    w.st.upsertSlice(slice("ns", std::string(name) + "-4", name, {epPort("http", 8080)},
                           {{"10.0.2.1", true, true, false, "node-b"}, {"10.0.2.2", true, true, false, "node-b"},
                            {"10.0.2.3", true, true, false, "node-b"}}));
  CHECK(w.fromPod("172.30.0.20", 80) ==
        "10.0.2.1:8080 1/3 from 10.0.1.5; 10.0.2.2:8080 1/3 from 10.0.1.5; 10.0.2.3:8080 1/3 from 10.0.1.5");
  auto rr = w.trace(packet(nft::eval::Entry::Prerouting, "10.0.1.5", "172.30.0.20", 80, api::Protocol::TCP, "veth1"));
  for (const auto& c : rr.candidates) CHECK(c.selection == nft::eval::Selection::RoundRobin);
  // Source hash: each endpoint's share of the 251 hash values (84/251, 84/251, 83/251).
  auto sh = w.trace(packet(nft::eval::Entry::Prerouting, "10.0.1.5", "172.30.0.21", 80, api::Protocol::TCP, "veth1"));
  REQUIRE(sh.candidates.size() == 3);
  double total = 0;
  for (const auto& c : sh.candidates) {
    CHECK(c.selection == nft::eval::Selection::Hash);
    CHECK(c.probability == doctest::Approx(1.0 / 3).epsilon(0.02));
    total += c.probability;
  }
  CHECK(total == doctest::Approx(1.0));
}
