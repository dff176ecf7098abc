// Schedulers: the names (ours and IPVS's), the source-hash table's shares and its moves, and what
// the evaluator sees of round-robin and source-hash services.
#include <doctest/doctest.h>

#include <map>

#include "pkg/config/node_config.h"
#include "pkg/render/source_hash_table.h"
#include "pkg/services/scheduler.h"
#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using services::Scheduler;

TEST_CASE("scheduler: our names and IPVS's, warnings for what nftables cannot do, unknown ones") {
  CHECK(services::parseScheduler("").scheduler == Scheduler::Random);
  CHECK(services::parseScheduler("random").warning.empty());
  CHECK(services::parseScheduler("rr").scheduler == Scheduler::RoundRobin);
  CHECK(services::parseScheduler("round-robin").scheduler == Scheduler::RoundRobin);
  auto wrr = services::parseScheduler("wrr");
  CHECK(wrr.scheduler == Scheduler::RoundRobin);
  CHECK(wrr.warning.find("weights") != std::string::npos);
  for (const char* h : {"sh", "mh", "source-hash"}) {
    CHECK(services::parseScheduler(h).scheduler == Scheduler::SourceHash);
    CHECK(services::parseScheduler(h).warning.empty());
  }
  for (const char* l : {"lc", "least-connection"}) {
    CHECK(services::parseScheduler(l).scheduler == Scheduler::LeastConnection);
    CHECK(services::parseScheduler(l).warning.empty());
  }
  auto wlc = services::parseScheduler("wlc");
  CHECK(wlc.scheduler == Scheduler::LeastConnection);
  CHECK(wlc.warning.find("weights") != std::string::npos);
  // Each fallback names the scheduler, says why, and that it is random.
  const std::map<std::string, std::string> why = {{"lblc", "nftables rules cannot see"},
                                                  {"lblcr", "nftables rules cannot see"},
                                                  {"dh", "the destination address"},
                                                  {"sed", "least-connection, lc, is the nearest"},
                                                  {"nq", "least-connection, lc, is the nearest"},
                                                  {"fo", "weights"},
                                                  {"ovf", "weights"}};
  for (const auto& [r, reason] : why) {
    auto c = services::parseScheduler(r);
    CHECK(c.known);
    CHECK(c.scheduler == Scheduler::Random);
    CHECK(c.warning.find("\"" + r + "\"") != std::string::npos);
    CHECK(c.warning.find(reason) != std::string::npos);
    CHECK(c.warning.substr(c.warning.size() - 8) == ": random");
  }
  CHECK_FALSE(services::parseScheduler("fastest").known);

  // The annotation wins over the node's default; an unknown one keeps the default with one line.
  auto svc = service("ns", "web", {"10.96.0.1"}, {port("http", 80)});
  CHECK(services::serviceScheduler(*svc, Scheduler::SourceHash) == Scheduler::SourceHash);
  svc->meta.annotations[services::kSchedulerAnnotation] = "rr";
  CHECK(services::serviceScheduler(*svc, Scheduler::SourceHash) == Scheduler::RoundRobin);
  svc->meta.annotations[services::kSchedulerAnnotation] = "bogus";
  std::string warning;
  CHECK(services::serviceScheduler(*svc, Scheduler::SourceHash, &warning) == Scheduler::SourceHash);
  CHECK(warning.find("bogus") != std::string::npos);

  // --scheduler / ipvs.scheduler into the node config.
  config::ProxyConfig pc;
  services::NodeConfig nc;
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

TEST_CASE("source hash table: a new table gives every endpoint floor or ceil of M/N, whatever the order of the list") {
  for (int n : {2, 3, 5, 10, 25, 100}) {
    auto eps = names(n);
    auto table = render::updateHashTable({}, eps);
    uint32_t m = 16;
    while (m < 8u * n) m *= 2;
    REQUIRE(table.size() == m);
    std::map<std::string, int> share;
    for (size_t s = 0; s < table.size(); ++s) share[table.at(s)]++;
    CHECK(share.size() == static_cast<size_t>(n));
    for (const auto& [ep, count] : share) {
      CHECK(count >= static_cast<int>(m / n));
      CHECK(count <= static_cast<int>((m + n - 1) / n));
    }
    auto reversed = eps;
    std::reverse(reversed.begin(), reversed.end());
    CHECK(render::updateHashTable({}, reversed) == table);
    // Nothing changed: nothing moves.
    CHECK(render::updateHashTable(table, reversed) == table);
  }
}

TEST_CASE("source hash table: a removed endpoint's slots go to the others, an added one takes only its share") {
  auto five = names(5);
  auto before = render::updateHashTable({}, five);
  auto four = five;
  four.erase(four.begin() + 2);
  auto after = render::updateHashTable(before, four);
  REQUIRE(after.size() == before.size());
  for (size_t s = 0; s < before.size(); ++s)
    if (before.at(s) != five[2]) CHECK(after.at(s) == before.at(s));  // nobody else moved
  auto six = names(6);
  auto grown = render::updateHashTable(before, six);
  REQUIRE(grown.size() == before.size());
  size_t moved = 0;
  for (size_t s = 0; s < before.size(); ++s)
    if (grown.at(s) != before.at(s)) {
      CHECK(grown.at(s) == six[5]);  // every moved slot went to the newcomer
      ++moved;
    }
  CHECK(moved == before.size() / 6);
}

TEST_CASE("behaviour: round-robin and source-hash services still reach every endpoint, each with its share") {
  World w;
  auto svc = service("ns", "rr", {"172.30.0.20"}, {port("http", 80)});
  svc->meta.annotations[services::kSchedulerAnnotation] = "round-robin";
  w.st.upsertService(svc);
  auto hashed = service("ns", "sh", {"172.30.0.21"}, {port("http", 80)});
  hashed->meta.annotations[services::kSchedulerAnnotation] = "source-hash";
  w.st.upsertService(hashed);
  for (const char* name : {"rr", "sh"})
    w.st.upsertSlice(slice("ns", std::string(name) + "-4", name, {epPort("http", 8080)},
                           {{"10.0.2.1", true, true, false, "node-b"}, {"10.0.2.2", true, true, false, "node-b"},
                            {"10.0.2.3", true, true, false, "node-b"}}));
  CHECK(w.fromPod("172.30.0.20", 80) ==
        "10.0.2.1:8080 1/3 from 10.0.1.5; 10.0.2.2:8080 1/3 from 10.0.1.5; 10.0.2.3:8080 1/3 from 10.0.1.5");
  auto rr = w.trace(packet(nft::eval::Entry::Prerouting, "10.0.1.5", "172.30.0.20", 80, api::Protocol::TCP, "veth1"));
  for (const auto& c : rr.candidates) CHECK(c.selection == nft::eval::Selection::RoundRobin);
  // Source hash: each endpoint's share of the 32 hash values (11/32, 11/32, 10/32).
  auto sh = w.trace(packet(nft::eval::Entry::Prerouting, "10.0.1.5", "172.30.0.21", 80, api::Protocol::TCP, "veth1"));
  REQUIRE(sh.candidates.size() == 3);
  double total = 0;
  for (const auto& c : sh.candidates) {
    CHECK(c.selection == nft::eval::Selection::Hash);
    const double slots = c.probability * 32;
    CHECK((slots == doctest::Approx(10) || slots == doctest::Approx(11)));
    total += c.probability;
  }
  CHECK(total == doctest::Approx(1.0));
}
