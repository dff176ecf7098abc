// Behaviour of ClientIP session affinity, asked of the packet evaluator: a first connection picks
// at random and leaves an entry behind; a later connection given those entries (alive, not timed
// out) reaches the same endpoint. No table object is named: only addresses, ports, timeouts.
#include <doctest/doctest.h>

#include <set>

#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using nft::eval::Entry;
using nft::eval::SetEntry;
using nft::eval::Trace;

namespace {

Ep ready(const std::string& ip, const std::string& node) { return {ip, true, true, false, node}; }
Ep terminating(const std::string& ip, const std::string& node) { return {ip, false, true, true, node}; }

std::shared_ptr<api::Service> sticky(std::shared_ptr<api::Service> s, int32_t timeout = 0) {
  s->sessionAffinity = "ClientIP";
  if (timeout) s->sessionAffinityTimeoutSeconds = timeout;
  return s;
}

// ns/web: ClientIP affinity, 172.30.0.10 / fd00:172:30::10 port 80 → 8080, three endpoints per
// family (one on this node), nodePort 30080; ns/plain: the same endpoints without affinity.
void addWeb(World& w, int32_t timeout = 0) {
  api::ServicePort p = port("http", 80);
  p.nodePort = 30080;
  auto web = sticky(service("ns", "web", {"172.30.0.10", "fd00:172:30::10"}, {p}), timeout);
  web->type = "NodePort";
  w.st.upsertService(web);
  w.st.upsertService(service("ns", "plain", {"172.30.0.11"}, {port("http", 80)}));
  for (const char* svc : {"web", "plain"}) {
    w.st.upsertSlice(slice("ns", std::string(svc) + "-4", svc, {epPort("http", 8080)},
                           {ready("10.0.1.7", "node-a"), ready("10.0.2.1", "node-b"), ready("10.0.2.2", "node-b")}));
    w.st.upsertSlice(slice("ns", std::string(svc) + "-6", svc, {epPort("http", 8080)},
                           {ready("fd00:10:0:1::7", "node-a"), ready("fd00:10:0:2::1", "node-b"),
                            ready("fd00:10:0:2::2", "node-b")},
                           "IPv6"));
  }
}

std::string where(const nft::eval::Candidate& c) { return c.address + ":" + std::to_string(c.port); }

Trace traceWith(World& w, const nft::eval::Packet& p, std::vector<SetEntry> alive) {
  w.env.dynamicEntries = std::move(alive);
  Trace t = w.trace(p);
  w.env.dynamicEntries.clear();
  INFO(nft::eval::traceText(t));
  CHECK(t.verdict == nft::eval::Verdict::Dnat);
  return t;
}

// Every first choice of `p`, each followed by a second connection that carries what the first
// one left behind: it must land on the same endpoint, alone, and refresh the same entry.
std::set<std::string> checkSticks(World& w, const nft::eval::Packet& p, uint64_t timeout) {
  Trace first = traceWith(w, p, {});
  std::set<std::string> seen;
  for (const auto& c : first.candidates) {
    REQUIRE(c.recorded.size() == 1);
    CHECK(c.recorded[0].timeout == timeout);
    Trace again = traceWith(w, p, c.recorded);
    REQUIRE(again.candidates.size() == 1);
    CHECK(where(again.candidates[0]) == where(c));
    CHECK(again.candidates[0].probability == doctest::Approx(1.0));
    CHECK(again.candidates[0].recorded == c.recorded);  // refreshed by each new connection
    seen.insert(where(c));
  }
  return seen;
}

nft::eval::Packet podPacket(const std::string& to, uint16_t port, const std::string& from) {
  return packet(Entry::Prerouting, from, to, port, api::Protocol::TCP, "veth1");
}

}  // namespace

TEST_CASE("behaviour: ClientIP affinity sticks each client to its first, random endpoint (IPv4 and IPv6)") {
  World w;
  addWeb(w);
  CHECK(checkSticks(w, podPacket("172.30.0.10", 80, "10.0.1.5"), 10800).size() == 3);
  CHECK(checkSticks(w, podPacket("fd00:172:30::10", 80, "fd00:10:0:1::5"), 10800).size() == 3);
  // The first choice is still random: 1/3 each.
  CHECK(w.fromPod("172.30.0.10", 80) ==
        "10.0.1.7:8080 1/3 from 10.0.1.5; 10.0.2.1:8080 1/3 from 10.0.1.5; 10.0.2.2:8080 1/3 from 10.0.1.5");
}

TEST_CASE("behaviour: ClientIP affinity is per client, per service port, and carries the service's timeout") {
  World w;
  addWeb(w, 30);
  Trace first = traceWith(w, podPacket("172.30.0.10", 80, "10.0.1.5"), {});
  const auto& stuck = first.candidates.front().recorded;
  // Another client is not stuck by this client's entry.
  CHECK(traceWith(w, podPacket("172.30.0.10", 80, "10.0.1.6"), stuck).candidates.size() == 3);
  // A service without affinity ignores it and keeps no state.
  Trace plain = traceWith(w, podPacket("172.30.0.11", 80, "10.0.1.5"), stuck);
  CHECK(plain.candidates.size() == 3);
  for (const auto& c : plain.candidates) CHECK(c.recorded.empty());
  // A timed-out entry (not given) means a random choice again; the timeout is the service's.
  checkSticks(w, podPacket("172.30.0.10", 80, "10.0.1.5"), 30);
  // The maximum is 86400 s.
  w.st.upsertService(sticky(service("ns", "long", {"172.30.0.12"}, {port("http", 80)}), 86400));
  w.st.upsertSlice(slice("ns", "long-4", "long", {epPort("http", 8080)}, {ready("10.0.2.1", "node-b")}));
  checkSticks(w, podPacket("172.30.0.12", 80, "10.0.1.5"), 86400);
}

TEST_CASE("behaviour: an affinity entry never outlives its endpoint: the client moves to a live one") {
  World w;
  addWeb(w);
  Trace first = traceWith(w, podPacket("172.30.0.10", 80, "10.0.1.5"), {});
  for (const auto& c : first.candidates) {
    World after;
    addWeb(after);
    std::vector<Ep> left;
    for (const char* ip : {"10.0.1.7", "10.0.2.1", "10.0.2.2"})
      if (c.address != ip) left.push_back(ready(ip, std::string(ip) == "10.0.1.7" ? "node-a" : "node-b"));
    after.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)}, left));
    Trace next = traceWith(after, podPacket("172.30.0.10", 80, "10.0.1.5"), c.recorded);
    for (const auto& n : next.candidates) {
      CHECK(n.address != c.address);
      CHECK(n.probability > 0);
    }
  }
}

TEST_CASE("behaviour: ClientIP affinity on NodePorts, and with externalTrafficPolicy Local only local endpoints") {
  World w;
  addWeb(w);
  auto np = [&](const std::string& from) { return packet(Entry::Prerouting, from, kNodeIP, 30080, api::Protocol::TCP, "eth0"); };
  CHECK(checkSticks(w, np(kOutside), 10800).size() == 3);
  auto web = sticky(service("ns", "web", {"172.30.0.10", "fd00:172:30::10"}, {port("http", 80)}));
  web->ports[0].nodePort = 30080;
  web->type = "NodePort";
  web->externalTrafficPolicy = "Local";
  w.st.upsertService(web);
  // From outside: this node's one endpoint, stuck (trivially) and with its own entry.
  CHECK(checkSticks(w, np(kOutside), 10800) == std::set<std::string>{"10.0.1.7:8080"});
  // internalTrafficPolicy Local: the ClusterIP too.
  web->internalTrafficPolicy = "Local";
  w.st.upsertService(web);
  CHECK(checkSticks(w, podPacket("172.30.0.10", 80, "10.0.1.5"), 10800) == std::set<std::string>{"10.0.1.7:8080"});
}

TEST_CASE("behaviour: ClientIP affinity over the terminating fallback") {
  World w;
  w.st.upsertService(sticky(service("ns", "web", {"172.30.0.10"}, {port("http", 80)})));
  w.st.upsertSlice(slice("ns", "web-4", "web", {epPort("http", 8080)},
                         {terminating("10.0.2.1", "node-b"), terminating("10.0.2.2", "node-b"),
                          {"10.0.2.3", false, false, true, "node-b"}}));
  CHECK(checkSticks(w, podPacket("172.30.0.10", 80, "10.0.1.5"), 10800) ==
        std::set<std::string>{"10.0.2.1:8080", "10.0.2.2:8080"});
}

// As upstream: the scope is the service port, whichever of its addresses the client dials
// (upstream's per-endpoint affinity sets are checked from the one service chain that the
// ClusterIP, the external and LoadBalancer IPs and the NodePort all reach).
TEST_CASE("behaviour: ClientIP affinity holds across the ClusterIP, an external IP, a LoadBalancer IP and the NodePort") {
  World w;
  addWeb(w);
  auto web = sticky(service("ns", "web", {"172.30.0.10", "fd00:172:30::10"}, {port("http", 80)}));
  web->ports[0].nodePort = 30080;
  web->type = "LoadBalancer";
  web->externalIPs = {"192.0.2.50"};
  web->loadBalancerIngress = {{"198.51.100.10", ""}};
  w.st.upsertService(web);
  const std::string client = "10.0.1.5";
  Trace first = traceWith(w, podPacket("172.30.0.10", 80, client), {});
  REQUIRE(first.candidates.size() == 3);
  for (const auto& c : first.candidates) {
    for (const auto& [to, port] : std::vector<std::pair<std::string, uint16_t>>{
             {"192.0.2.50", 80}, {"198.51.100.10", 80}, {kNodeIP, 30080}, {"172.30.0.10", 80}}) {
      INFO(to << ":" << port << " after " << where(c));
      Trace again = traceWith(w, podPacket(to, port, client), c.recorded);
      REQUIRE(again.candidates.size() == 1);
      CHECK(where(again.candidates[0]) == where(c));
    }
  }
  // Another service port of the same service is another scope.
  auto two = sticky(service("ns", "two", {"172.30.0.20"}, {port("http", 80), port("alt", 81)}));
  w.st.upsertService(two);
  w.st.upsertSlice(slice("ns", "two-4", "two", {epPort("http", 8080), epPort("alt", 8081)},
                         {ready("10.0.2.1", "node-b"), ready("10.0.2.2", "node-b")}));
  Trace http = traceWith(w, podPacket("172.30.0.20", 80, client), {});
  CHECK(traceWith(w, podPacket("172.30.0.20", 81, client), http.candidates.front().recorded).candidates.size() == 2);
}

// Two ServiceCIDRs can hold IPv6 ClusterIPs that differ only above their low 32 bits. Their scope
// was those 32 bits: a client's entry for one service stuck it to a slot of the other.
TEST_CASE("behaviour: IPv6 services whose ClusterIPs share their low 32 bits keep separate affinity") {
  World w;
  for (const char* name : {"a", "b"}) {
    const std::string vip = std::string("fd00:") + (name[0] == 'a' ? "1" : "2") + "::10";
    w.st.upsertService(sticky(service("ns", name, {vip}, {port("http", 80)})));
    w.st.upsertSlice(slice("ns", std::string(name) + "-6", name, {epPort("http", 8080)},
                           {ready(std::string("fd00:10:") + name + "::1", "node-b"),
                            ready(std::string("fd00:10:") + name + "::2", "node-b")},
                           "IPv6"));
  }
  Trace a = traceWith(w, podPacket("fd00:1::10", 80, "fd00:10:0:1::5"), {});
  for (const auto& c : a.candidates) {
    REQUIRE(c.recorded.size() == 1);
    // The same client to b, with its entry for a alive: a fresh random choice among b's own.
    Trace b = traceWith(w, podPacket("fd00:2::10", 80, "fd00:10:0:1::5"), c.recorded);
    std::set<std::string> reached;
    for (const auto& n : b.candidates) reached.insert(n.address);
    CHECK(reached == std::set<std::string>{"fd00:10:b::1", "fd00:10:b::2"});
    for (const auto& n : b.candidates) CHECK(n.probability == doctest::Approx(0.5));
  }
  CHECK(checkSticks(w, podPacket("fd00:2::10", 80, "fd00:10:0:1::5"), 10800).size() == 2);
}
