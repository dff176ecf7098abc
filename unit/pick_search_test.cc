// The pick chains' search for a destination's endpoint count (pick_chains.h), run with real
// packets through the packet evaluator: for every count of the pool and one above it, in every key
// space, protocol and family, the first packet reaches exactly the destination's endpoints, each
// equally likely, after the number of slot lookups the table in pick_chains.h promises.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "nft/eval/evaluator.h"
#include "unit/behaviour.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

// Lookups in the search chains per count (slot probes, tries and the dnat map; pick_chains.h,
// docs/architecture.md), on the path where the first try lands (or without a try: counts 1, 2)
// and on the longest path (every try misses). Index 0 unused. A power of two takes one path only.
const uint32_t kFewestLookups[render::kPooledCounts + 1] = {0, 2, 3, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
const uint32_t kMostLookups[render::kPooledCounts + 1] = {0, 2, 3, 6, 4, 9, 7, 8, 5, 11, 9, 10, 7, 10, 8, 9, 5};
constexpr uint32_t kAbovePool = render::kPooledCounts + 1;
const api::Protocol kProtos[] = {api::Protocol::TCP, api::Protocol::UDP, api::Protocol::SCTP};

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%x", v);
  return b;
}
// Destination i (one per count and protocol) and its endpoints k.
uint32_t destinationIndex(uint32_t count, size_t proto) { return (count - 1) * 3 + static_cast<uint32_t>(proto); }
std::string endpointIP(bool v6, uint32_t k) { return v6 ? "fd00:10:0:1::" + hex(0x100 + k) : "10.0.1." + std::to_string(100 + k); }
std::string clusterIP(bool v6, bool local, uint32_t i) {
  return v6 ? std::string(local ? "fd00:172:31::" : "fd00:172:30::") + hex(i + 1) : std::string(local ? "172.31.0." : "172.30.0.") + std::to_string(i + 1);
}
std::string lbIP(bool v6, uint32_t i) { return v6 ? "2001:db8:1::" + hex(i + 1) : "203.0.113." + std::to_string(i + 1); }
int32_t nodePort(bool local, uint32_t i) { return (local ? 31000 : 30000) + static_cast<int32_t>(i); }

// For each count and protocol: `cluster-N-proto`, a NodePort service (eTP=Cluster), and
// `local-N-proto`, a LoadBalancer with eTP=Local; N endpoints on this node, both families.
void addDestinations(World& w) {
  for (uint32_t n = 1; n <= kAbovePool; ++n)
    for (size_t p = 0; p < 3; ++p) {
      const uint32_t i = destinationIndex(n, p);
      for (bool local : {false, true}) {
        std::string name = std::string(local ? "local-" : "cluster-") + std::to_string(n) + "-" + api::protocolName(kProtos[p]);
        auto sp = port("p", 80, kProtos[p]);
        sp.nodePort = nodePort(local, i);
        auto s = service("ns", name, {clusterIP(false, local, i), clusterIP(true, local, i)}, {sp});
        s->type = local ? "LoadBalancer" : "NodePort";
        if (local) s->loadBalancerIngress = {{lbIP(false, i), "", ""}, {lbIP(true, i), "", ""}};
        s->externalTrafficPolicy = local ? "Local" : "Cluster";
        w.st.upsertService(s);
        for (bool v6 : {false, true}) {
          std::vector<Ep> eps;
          for (uint32_t k = 0; k < n; ++k) eps.push_back({endpointIP(v6, k), true, true, false, "node-a"});
          w.st.upsertSlice(slice("ns", name + (v6 ? "-6" : "-4"), name, {epPort("p", 8080, kProtos[p])}, eps,
                                 v6 ? "IPv6" : "IPv4"));
        }
      }
    }
}

// What outcome() says of a packet that reaches each of the n endpoints alike, seen from `from`.
std::string spreadOver(bool v6, uint32_t n, const std::string& from) {
  std::vector<std::string> parts;
  for (uint32_t k = 0; k < n; ++k)
    parts.push_back((v6 ? "[" + endpointIP(v6, k) + "]" : endpointIP(v6, k)) + ":8080" +
                    (n == 1 ? "" : " 1/" + std::to_string(n)) + " from " + from);
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// The names of every pick chain (the search) of every pool, per family.
std::set<std::string> searchChains(nft::Family f) {
  std::set<std::string> names;
  for (render::KeySpace s : render::kSpaces)
    for (api::Protocol p : kProtos)
      for (const nft::Chain& c : render::protocolPickChains(f, {s, p})) names.insert(c.name);
  return names;
}

struct Probe {
  const char* space;
  nft::eval::Packet packet;
  std::string from;  // the source the endpoint sees
};

// The packet of each key space to destination i.
std::vector<Probe> probes(bool v6, size_t proto, uint32_t i) {
  const api::Protocol pr = kProtos[proto];
  const std::string pod = v6 ? "fd00:10:0:1::5" : "10.0.1.5", outside = v6 ? kOutside6 : kOutside;
  const std::string node = v6 ? kNodeIP6 : kNodeIP;
  using nft::eval::Entry;
  return {
      {"Address", packet(Entry::Prerouting, pod, clusterIP(v6, false, i), 80, pr, "veth1"), pod},
      {"LocalAddress", packet(Entry::Prerouting, outside, lbIP(v6, i), 80, pr, "eth0"), outside},
      {"NodePort", packet(Entry::Prerouting, outside, node, static_cast<uint16_t>(nodePort(false, i)), pr, "eth0"), node},
      {"LocalNodePort", packet(Entry::Prerouting, outside, node, static_cast<uint16_t>(nodePort(true, i)), pr, "eth0"), outside},
  };
}

}  // namespace

TEST_CASE("pick search: every count 1..16 and one above the pool reaches exactly its endpoints after the promised lookups") {
  World w;
  addDestinations(w);
  FakePipeline pipe(w.cfg);
  pipe.renderer.setHostAddresses(w.host);
  pipe.sync(w.st);
  for (bool v6 : {false, true}) {
    const nft::Family f = v6 ? nft::Family::IPv6 : nft::Family::IPv4;
    // The rendered model, and the table as the fake kernel lists it after the commit.
    std::vector<nft::eval::EvalTable> model, listedTables;
    for (const auto& t : pipe.committed.ruleset.tables) {
      if (t.family != f) continue;
      model.push_back(nft::eval::tableFromModel(t));
      nft::ListedTable listed;
      pipe.kernel.list(t.family, t.name, &listed);
      listedTables.push_back(nft::eval::tableFromListing(t.family, t.name, listed));
    }
    nft::eval::Evaluator fromModel(std::move(model)), fromKernel(std::move(listedTables));
    const std::set<std::string> search = searchChains(f);
    for (uint32_t n = 1; n <= kAbovePool; ++n)
      for (size_t p = 0; p < 3; ++p)
        for (const Probe& probe : probes(v6, p, destinationIndex(n, p))) {
          auto t = fromModel.trace(probe.packet, w.env);
          auto k = fromKernel.trace(probe.packet, w.env);
          const std::string what = std::string(probe.space) + " " + api::protocolName(kProtos[p]) + " " +
                                   std::to_string(n) + " endpoints\n" + nft::eval::traceText(t);
          INFO(what);
          CHECK(outcome(t) == spreadOver(v6, n, probe.from));
          CHECK(outcome(k) == outcome(t));
          // Lookups in the search chains: the slot tests, the tries and the dnat maps. Above the
          // pool the destination has a chain of its own and never comes this way.
          const size_t fewest = n <= render::kPooledCounts ? kFewestLookups[n] : 0;
          const size_t most = n <= render::kPooledCounts ? kMostLookups[n] : 0;
          for (const auto* trace : {&t, &k})
            for (const auto& c : trace->candidates) {
              size_t inSearch = 0;
              for (const std::string& l : c.setLookups) inSearch += search.count(l.substr(0, l.find(" @")));
              CHECK(inSearch >= fewest);
              CHECK(inSearch <= most);
            }
        }
  }
}

TEST_CASE("pick search: the tree's slots and chains (names readable in a listing, every count reached once)") {
  const std::vector<nft::Chain> chains = render::protocolPickChains(nft::Family::IPv4, {render::KeySpace::Address, api::Protocol::TCP});
  std::vector<std::string> names;
  for (const auto& c : chains) names.push_back(c.name);
  CHECK(names == std::vector<std::string>{"pick-tcp", "pick-tcp-3-4", "pick-tcp-5-8", "pick-tcp-5-6", "pick-tcp-9-12",
                                          "pick-tcp-9-10", "pick-tcp-13-14"});
  CHECK(render::searchChainName(render::KeySpace::LocalNodePort, api::Protocol::UDP, 9, 12) == "nodeport-pick-local-udp-9-12");
  // Each count is the comment of exactly one leaf rule (a dnat, no goto).
  std::map<std::string, int> leaves;
  for (const auto& c : chains)
    for (const auto& r : c.rules)
      if (r.comment.find('-') == std::string::npos) ++leaves[r.comment];
  CHECK(leaves.size() == render::kPooledCounts);
  for (const auto& [comment, times] : leaves) CHECK_MESSAGE(times == 1, comment);
  CHECK(chains[0].rules.size() == 9);  // 1, 2, ->3-4, ->5-8, try 9-16, ->9-12, ->13-14, 15, 16
  // A try where every count left is over half of the chain's top: first in each chain below,
  // before the probes of 9-16 in pick-tcp.
  std::vector<std::string> tries;
  for (const auto& c : chains)
    for (const auto& r : c.rules)
      if (r.comment.rfind("try ", 0) == 0) tries.push_back(c.name + ": " + r.comment);
  CHECK(tries == std::vector<std::string>{"pick-tcp: try 9-16 endpoints", "pick-tcp-3-4: try 3-4 endpoints",
                                          "pick-tcp-5-8: try 5-8 endpoints", "pick-tcp-5-6: try 5-6 endpoints",
                                          "pick-tcp-9-12: try 9-12 endpoints", "pick-tcp-9-10: try 9-10 endpoints",
                                          "pick-tcp-13-14: try 13-14 endpoints"});
  CHECK(chains[0].rules[4].comment == "try 9-16 endpoints");
}
