// The first packet of every connection walks the `services` chain: its cost is the data path's
// (bench/datapath_bench.py, issue 27). A `fib` match is a route lookup; in each rule it must come
// after every cheaper match (a set lookup, the source CIDR), so that a pod's connection to an
// ordinary ClusterIP makes no route lookup at all.
#include <doctest/doctest.h>

#include <sstream>

#include "nft/diff.h"
#include "pkg/render/render.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

std::string renderedText(const services::NodeConfig& cfg) {
  state::ClusterState st;
  st.upsertService(service("default", "web", {"10.96.0.10"}, {port("http", 80)}));
  st.upsertSlice(slice("default", "web-1", "web", {epPort("http", 8080)}, {{"10.244.1.2"}}));
  render::Renderer r(cfg);
  return nft::planReconcile({}, r.render(st, nullptr)).txn.toText();
}

// The `services` rules with a fib match, each with what follows that match.
std::vector<std::pair<std::string, std::string>> afterFib(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("add rule ", 0) != 0 || line.find(" kube-proxy services ") == std::string::npos) continue;
    auto fib = line.find("fib saddr type ");
    if (fib == std::string::npos) continue;
    std::string rest = line.substr(fib + std::string("fib saddr type ").size());
    rest = rest.substr(rest.find("local") + 5);  // "== local" / "!= local"
    out.emplace_back(line, rest.substr(0, rest.find(" comment ")));
  }
  return out;
}

void checkFibLast(const services::NodeConfig& cfg) {
  auto rules = afterFib(renderedText(cfg));
  REQUIRE(rules.size() >= 4);  // eTP=Local: node traffic (2 rules) and outside traffic (2 or more)
  for (const auto& [line, rest] : rules) {
    INFO(line);
    // After the fib match only the rule's action: a mark, a jump, or a verdict map (whose key
    // reads the destination): no source match, no comparison, no set lookup.
    CHECK(rest.find("saddr") == std::string::npos);
    CHECK(rest.find("!=") == std::string::npos);
    CHECK(rest.find("==") == std::string::npos);
    size_t lookups = 0, vmaps = 0;
    for (size_t at = rest.find(" @"); at != std::string::npos; at = rest.find(" @", at + 1)) ++lookups;
    for (size_t at = rest.find("vmap @"); at != std::string::npos; at = rest.find("vmap @", at + 1)) ++vmaps;
    CHECK(lookups == vmaps);
  }
}

}  // namespace

TEST_CASE("first packet: every services rule tests fib after its cheaper matches (cluster CIDR detector)") {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  cfg.clusterCidrV4 = net::parseCidr("10.244.0.0/16");
  checkFibLast(cfg);
}

TEST_CASE("first packet: every services rule tests fib after its cheaper matches (no local detector)") {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  checkFibLast(cfg);
}
