// Least connection (issue 26): the counts as IPVS keeps them and the choices they make
// (conntrack/lc_counts.h), the slots that carry a choice and what a new one costs (render), the
// loop that syncs choices without waiting for --min-sync-period (sync/loop.h), and a restart that
// keeps the choice the kernel holds.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "nft/eval/evaluator.h"
#include "nft/fake.h"
#include "pkg/conntrack/lc_counts.h"
#include "pkg/conntrack/lc_events.h"
#include "pkg/render/least_conn.h"
#include "pkg/sync/loop.h"
#include "pkg/sync/syncer.h"
#include "unit/behaviour.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;
using namespace std::chrono_literals;

namespace {

std::string value(const std::string& ip, int port) {
  return nft::ex::concat({nft::ex::addr(ip), nft::ex::number(port)}).json;
}

const char* kVip = "172.30.0.30";
const char* kOwner = "ip all/tcp/http";

// One least-connection TCP port (ClusterIP kVip:80, NodePort 30080, endpoints .1-.3:8080) and one
// UDP port (kVip:53, endpoints .1-.2:5353).
std::map<std::string, std::vector<services::LeastConnPort>> lcPorts() {
  services::LeastConnPort tcp;
  tcp.serviceKey = "ns/lc", tcp.portName = "http", tcp.protocol = api::Protocol::TCP, tcp.port = 80;
  tcp.frontendIps = {kVip}, tcp.nodePort = 30080;
  for (int i = 1; i <= 3; ++i) {
    std::string ip = "10.0.2." + std::to_string(i);
    tcp.endpoints.push_back({ip, 8080, value(ip, 8080)});
  }
  tcp.sets.push_back({kOwner, {value("10.0.2.1", 8080), value("10.0.2.2", 8080), value("10.0.2.3", 8080)}});
  services::LeastConnPort udp = tcp;
  udp.portName = "dns", udp.protocol = api::Protocol::UDP, udp.port = 53, udp.nodePort.reset();
  udp.endpoints = {{"10.0.2.1", 5353, value("10.0.2.1", 5353)}, {"10.0.2.2", 5353, value("10.0.2.2", 5353)}};
  udp.sets = {{"ip all/udp/dns", {value("10.0.2.1", 5353), value("10.0.2.2", 5353)}}};
  return {{"ns/lc", {tcp, udp}}};
}

conntrack::Ip ip(const std::string& text) {
  uint8_t family = 0;
  return *conntrack::parseIp(text, &family);
}

// An entry the node DNATed: client -> dst:dport, answered by endpoint:eport.
conntrack::Flow entry(uint32_t id, const std::string& dst, uint16_t dport, const std::string& endpoint, uint16_t eport,
                      uint8_t proto = IPPROTO_TCP, uint8_t state = 3 /* ESTABLISHED */) {
  conntrack::Flow f;
  f.family = AF_INET, f.proto = proto, f.id = id, f.state = proto == IPPROTO_UDP ? 0 : state;
  f.origSrc = ip("10.0.1.5"), f.origDst = ip(dst), f.replySrc = ip(endpoint);
  f.origSport = static_cast<uint16_t>(40000 + id), f.origDport = dport, f.replySport = eport;
  return f;
}

std::map<std::string, std::pair<uint32_t, uint32_t>> countsOf(const conntrack::LeastConnCounter& c) {
  std::map<std::string, std::pair<uint32_t, uint32_t>> out;
  for (const auto& e : c.endpointConnections()) out[e.portName + " " + e.endpoint] = {e.active, e.inactive};
  return out;
}

// The choice of `owner` among the counter's next choices (nullopt: unchanged).
std::optional<std::vector<std::string>> choiceOf(conntrack::LeastConnCounter& c, std::mt19937& rng,
                                                 const std::string& owner = kOwner) {
  std::optional<std::vector<std::string>> out;
  for (auto& ch : c.takeChoices(rng))
    if (ch.owner == owner) out = ch.values;
  return out;
}

// Where a new TCP connection from a pod (10.0.1.5) to kVip:80 goes, in the committed ruleset.
std::string toVip(const nft::Ruleset& ruleset, const nft::eval::Environment& env) {
  return outcome(nft::eval::evaluate(
      ruleset, packet(nft::eval::Entry::Prerouting, "10.0.1.5", kVip, 80, api::Protocol::TCP, "veth1"), env));
}

// The service ns/lc (kVip:80 -> 8080) with `scheduler` as its annotation, and its endpoints.
state::ClusterState lcState(const std::string& scheduler, std::vector<Ep> eps) {
  state::ClusterState st;
  auto svc = service("ns", "lc", {kVip}, {port("http", 80)});
  svc->meta.annotations[services::kSchedulerAnnotation] = scheduler;
  st.upsertService(svc);
  st.upsertSlice(slice("ns", "lc-1", "lc", {epPort("http", 8080)}, std::move(eps)));
  return st;
}

// What a restarted daemon would commit over the kernel `p` left (slots adopted from its listing).
nft::Plan restartPlan(FakePipeline& p, const state::ClusterState& st, const services::NodeConfig& cfg) {
  std::vector<nft::ListedTable> listed = p.listBoth();
  render::Renderer fresh(cfg);
  fresh.adoptSlots(listed);
  return nft::planReconcile(listed, fresh.render(st, nullptr));
}

}  // namespace

TEST_CASE("least connection: counts as IPVS (TCP established active, other states and UDP inactive), per endpoint") {
  conntrack::LeastConnCounter c;
  c.setPorts(lcPorts());
  c.update(entry(1, kVip, 80, "10.0.2.1", 8080));                      // established
  c.update(entry(2, kVip, 80, "10.0.2.2", 8080, IPPROTO_TCP, 1));      // SYN_SENT: inactive
  c.update(entry(3, "192.168.1.2", 30080, "10.0.2.2", 8080));          // the NodePort, any address
  c.update(entry(4, kVip, 53, "10.0.2.1", 5353, IPPROTO_UDP));         // UDP: inactive
  c.update(entry(5, "172.30.0.99", 80, "10.0.2.1", 8080));             // another destination
  c.update(entry(6, kVip, 80, "10.0.2.9", 8080));                      // not one of its endpoints
  c.update(entry(7, kVip, 80, kVip, 80, IPPROTO_TCP, 1));              // not DNATed
  auto counts = countsOf(c);
  CHECK(counts["http 10.0.2.1:8080"] == std::pair<uint32_t, uint32_t>{1, 0});
  CHECK(counts["http 10.0.2.2:8080"] == std::pair<uint32_t, uint32_t>{1, 1});
  CHECK(counts["http 10.0.2.3:8080"] == std::pair<uint32_t, uint32_t>{0, 0});
  CHECK(counts["dns 10.0.2.1:5353"] == std::pair<uint32_t, uint32_t>{0, 1});
  CHECK(c.entries() == 4);
  // SYN_SENT -> ESTABLISHED moves it to active; a destroy uncounts; an unknown destroy is nothing.
  c.update(entry(2, kVip, 80, "10.0.2.2", 8080));
  c.destroy(1);
  c.destroy(99);
  counts = countsOf(c);
  CHECK(counts["http 10.0.2.1:8080"] == std::pair<uint32_t, uint32_t>{0, 0});
  CHECK(counts["http 10.0.2.2:8080"] == std::pair<uint32_t, uint32_t>{2, 0});
  // A dump replaces everything it does not see.
  c.beginResync();
  c.resyncEntry(entry(10, kVip, 80, "10.0.2.3", 8080, IPPROTO_TCP, 7 /* TIME_WAIT */));
  c.endResync();
  counts = countsOf(c);
  CHECK(counts["http 10.0.2.2:8080"] == std::pair<uint32_t, uint32_t>{0, 0});
  CHECK(counts["http 10.0.2.3:8080"] == std::pair<uint32_t, uint32_t>{0, 1});
  CHECK(c.entries() == 1);
}

TEST_CASE("least connection: the choice is the least active x 256 + inactive, every tied endpoint, made again only on change") {
  conntrack::LeastConnCounter c;
  std::mt19937 rng(1);
  c.setPorts(lcPorts());
  const auto a = value("10.0.2.1", 8080), b = value("10.0.2.2", 8080), d = value("10.0.2.3", 8080);
  CHECK(choiceOf(c, rng) == std::vector<std::string>{a, b, d});  // all tie at 0
  CHECK_FALSE(choiceOf(c, rng));                                  // nothing new
  c.update(entry(1, kVip, 80, "10.0.2.1", 8080));
  CHECK(choiceOf(c, rng) == std::vector<std::string>{b, d});
  // 255 inactive entries weigh less than one active one.
  for (uint32_t id = 100; id < 355; ++id) c.update(entry(id, kVip, 80, "10.0.2.2", 8080, IPPROTO_TCP, 7));
  c.update(entry(2, kVip, 80, "10.0.2.3", 8080));
  CHECK(choiceOf(c, rng) == std::vector<std::string>{b});
  c.update(entry(355, kVip, 80, "10.0.2.2", 8080, IPPROTO_TCP, 7));  // 256 inactive: ties with one active
  CHECK(choiceOf(c, rng) == std::vector<std::string>{a, b, d});
  // Ports that change keep the counts of the endpoints that stay.
  auto ports = lcPorts();
  auto& tcp = ports["ns/lc"][0];
  tcp.endpoints.pop_back();
  tcp.sets[0].values.pop_back();
  c.setPorts(ports);
  CHECK(countsOf(c)["http 10.0.2.1:8080"] == std::pair<uint32_t, uint32_t>{1, 0});
  CHECK(choiceOf(c, rng) == std::vector<std::string>{a, b});
}

TEST_CASE("least connection: a tie larger than the slots is a random sample of them, kept while it stays tied") {
  auto ports = lcPorts();
  auto& tcp = ports["ns/lc"][0];
  tcp.endpoints.clear();
  tcp.sets[0].values.clear();
  for (int i = 1; i <= 40; ++i) {
    std::string addr = "10.0.3." + std::to_string(i);
    tcp.endpoints.push_back({addr, 8080, value(addr, 8080)});
    tcp.sets[0].values.push_back(value(addr, 8080));
  }
  conntrack::LeastConnCounter c;
  std::mt19937 rng(7);
  c.setPorts(ports);
  auto first = choiceOf(c, rng);
  REQUIRE(first);
  CHECK(first->size() == services::kLeastConnSlots);
  // A connection to an endpoint outside the sample changes nothing; one inside replaces the sample.
  std::string outside;
  for (const auto& v : tcp.sets[0].values)
    if (std::find(first->begin(), first->end(), v) == first->end()) outside = v;
  const std::string outsideIp = tcp.endpoints[std::find(tcp.sets[0].values.begin(), tcp.sets[0].values.end(), outside) -
                                              tcp.sets[0].values.begin()].ip;
  c.update(entry(1, kVip, 80, outsideIp, 8080));
  CHECK_FALSE(choiceOf(c, rng));
  const std::string insideIp = tcp.endpoints[std::find(tcp.sets[0].values.begin(), tcp.sets[0].values.end(), (*first)[0]) -
                                             tcp.sets[0].values.begin()].ip;
  c.update(entry(2, kVip, 80, insideIp, 8080));
  auto second = choiceOf(c, rng);
  REQUIRE(second);
  CHECK(second->size() == services::kLeastConnSlots);
  CHECK(std::find(second->begin(), second->end(), (*first)[0]) == second->end());
  CHECK(std::find(second->begin(), second->end(), outside) == second->end());
}

TEST_CASE("least connection: a burst names IPVS's next picks for the connections expected before the next choice") {
  // K entries first seen in the last 20 ms: the slots are rounds of the least loaded, each round
  // adding one connection (256) to each of its endpoints, until K are named; then, as the
  // arrivals age out, the tie alone again (IPVS's choice for one connection).
  conntrack::LeastConnCounter c(20ms);
  std::mt19937 rng(3);
  c.setPorts(lcPorts());
  const auto a = value("10.0.2.1", 8080), b = value("10.0.2.2", 8080), d = value("10.0.2.3", 8080);
  const conntrack::LeastConnCounter::Time t0 = conntrack::LeastConnCounter::Time{} + 10s;
  CHECK(c.nextExpiry() == conntrack::LeastConnCounter::Time::max());
  // Counted by a dump: not arrivals. One connection at a time: the tie, exactly.
  c.resyncEntry(entry(1, kVip, 80, "10.0.2.1", 8080));
  CHECK(choiceOf(c, rng) == std::vector<std::string>{b, d});
  c.update(entry(2, kVip, 80, "10.0.2.2", 8080), t0);
  CHECK(c.nextExpiry() == t0 + 20ms);
  CHECK(c.takeChoices(rng, t0).at(0).values == std::vector<std::string>{d});
  // Four arrivals within the window (a: 3 active, b: 2, d: 0): d, d again, then b and d.
  c.update(entry(3, kVip, 80, "10.0.2.1", 8080), t0 + 1ms);
  c.update(entry(4, kVip, 80, "10.0.2.1", 8080), t0 + 2ms);
  c.update(entry(5, kVip, 80, "10.0.2.2", 8080), t0 + 3ms);
  auto burst = c.takeChoices(rng, t0 + 3ms);
  REQUIRE(burst.size() == 1);
  CHECK(burst[0].values == std::vector<std::string>{b, d, d, d});
  // Every endpoint in the same round: one slot each (the shares reduced), never a split round.
  c.update(entry(6, kVip, 80, "10.0.2.3", 8080), t0 + 4ms);
  c.update(entry(7, kVip, 80, "10.0.2.3", 8080), t0 + 4ms);
  c.update(entry(8, kVip, 80, "10.0.2.3", 8080), t0 + 4ms);
  c.update(entry(9, kVip, 80, "10.0.2.2", 8080), t0 + 4ms);
  CHECK(c.takeChoices(rng, t0 + 4ms).at(0).values == std::vector<std::string>{a, b, d});
  // The arrivals age out one by one; at the last, the tie alone.
  CHECK(c.nextExpiry() == t0 + 20ms);
  c.destroy(1);  // a: 2 active
  CHECK(c.takeChoices(rng, t0 + 30ms).at(0).values == std::vector<std::string>{a});
  CHECK(c.nextExpiry() == conntrack::LeastConnCounter::Time::max());
}

TEST_CASE("least connection: a burst on UDP weighs each next flow as one inactive entry") {
  conntrack::LeastConnCounter c(20ms);
  std::mt19937 rng(3);
  c.setPorts(lcPorts());
  const auto a = value("10.0.2.1", 5353), b = value("10.0.2.2", 5353);
  const conntrack::LeastConnCounter::Time t0 = conntrack::LeastConnCounter::Time{} + 10s;
  for (uint32_t id = 1; id <= 3; ++id) c.update(entry(id, kVip, 53, "10.0.2.1", 5353, IPPROTO_UDP), t0);
  // a: 3 inactive, b: 0; three arrivals: b, b, b (b reaches 3 only after them).
  std::optional<std::vector<std::string>> udp;
  for (auto& ch : c.takeChoices(rng, t0))
    if (ch.owner == "ip all/udp/dns") udp = ch.values;
  CHECK(udp == std::vector<std::string>{b});
  c.update(entry(4, kVip, 53, "10.0.2.2", 5353, IPPROTO_UDP), t0);
  c.update(entry(5, kVip, 53, "10.0.2.2", 5353, IPPROTO_UDP), t0);
  // a: 3, b: 2, five arrivals: b (3), then a and b (4) twice: 5 named -> a 2, b 3.
  udp.reset();
  for (auto& ch : c.takeChoices(rng, t0))
    if (ch.owner == "ip all/udp/dns") udp = ch.values;
  CHECK(udp == std::vector<std::string>{a, a, b, b, b});
}

TEST_CASE("least connection: terminating endpoints are not chosen while ready ones exist") {
  World w;
  auto svc = service("ns", "lc", {kVip}, {port("http", 80)});
  svc->meta.annotations[services::kSchedulerAnnotation] = "lc";
  w.st.upsertService(svc);
  auto endpoints = [&](bool readyOne) {
    w.st.upsertSlice(slice("ns", "lc-1", "lc", {epPort("http", 8080)},
                           {{"10.0.2.1", readyOne, true, !readyOne, "node-b"},
                            {"10.0.2.2", false, true, true, "node-b"},
                            {"10.0.2.3", false, true, true, "node-b"}}));
  };
  endpoints(true);
  FakePipeline p(w.cfg);
  p.renderer.setHostAddresses(w.host);
  p.sync(w.st);
  auto outcomeNow = [&] { return toVip(p.committed.ruleset, w.env); };
  // One ready endpoint: the only one, whatever the counts say (no set to choose in).
  CHECK(outcomeNow() == "10.0.2.1:8080 from 10.0.1.5");
  CHECK(p.renderer.leastConnPorts().count("ns/lc") == 0);
  // None ready: the serving terminating ones, chosen among by their counts.
  endpoints(false);
  w.st.changedServices.insert("ns/lc");
  p.sync(w.st);
  REQUIRE(p.renderer.leastConnPorts().count("ns/lc") == 1);
  const auto& set = p.renderer.leastConnPorts().at("ns/lc")[0].sets.at(0);
  CHECK(set.values.size() == 3);
  CHECK(p.renderer.choose("ns/lc", set.owner, {value("10.0.2.2", 8080)}));
  p.sync(w.st);
  CHECK(outcomeNow() == "10.0.2.2:8080 from 10.0.1.5");
}

TEST_CASE("least connection: a burst's shares are slots, and a restart keeps them") {
  state::ClusterState st = lcState("wlc", {{"10.0.2.1"}, {"10.0.2.2"}, {"10.0.2.3"}});
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  World w;
  FakePipeline p(cfg);
  p.sync(st);
  p.renderer.choose("ns/lc", kOwner, {value("10.0.2.3", 8080), value("10.0.2.1", 8080), value("10.0.2.3", 8080)});
  p.sync(st);
  CHECK(toVip(p.committed.ruleset, w.env) == "10.0.2.1:8080 1/3 from 10.0.1.5; 10.0.2.3:8080 2/3 from 10.0.1.5");
  nft::Plan plan = restartPlan(p, st, cfg);
  CHECK_FALSE(plan.needsFull);
  CHECK_MESSAGE(plan.txn.empty(), plan.txn.toText());
}

TEST_CASE("least connection: the event filter covers the frontends with at most the prefixes it has room for") {
  std::vector<conntrack::Ip> many;
  for (int i = 0; i < 1000; ++i) many.push_back(ip("10.96." + std::to_string(i / 250) + "." + std::to_string(i % 250)));
  auto cover = conntrack::coverPrefixes(many, AF_INET, 127);
  CHECK(cover.size() <= 127);
  CHECK(cover.size() >= 4);
  auto inside = [&](const conntrack::Ip& a) {
    for (const auto& p : cover)
      if (conntrack::coverPrefixes({a}, AF_INET, 1)[0].bits >= p.bits &&
          conntrack::coverPrefixes({a, p.ip}, AF_INET, 1)[0].bits >= p.bits)
        return true;
    return false;
  };
  for (const auto& a : many) CHECK(inside(a));
  auto exact = conntrack::coverPrefixes({ip("10.96.0.1"), ip("10.96.0.9")}, AF_INET, 127);
  REQUIRE(exact.size() == 2);
  CHECK(exact[0].bits == 32);
  CHECK(conntrack::coverPrefixes({ip("fd00::1"), ip("fd00::2"), ip("fd01::1")}, AF_INET6, 2).size() == 2);
}

TEST_CASE("least connection: the slots name the chosen endpoints; a new choice changes elements only") {
  World w;
  auto svc = service("ns", "lc", {kVip}, {port("http", 80)});
  svc->meta.annotations[services::kSchedulerAnnotation] = "least-connection";
  w.st.upsertService(svc);
  w.st.upsertSlice(slice("ns", "lc-1", "lc", {epPort("http", 8080)},
                         {{"10.0.2.1", true, true, false, "node-b"}, {"10.0.2.2", true, true, false, "node-b"},
                          {"10.0.2.3", true, true, false, "node-b"}}));
  FakePipeline p(w.cfg);
  p.renderer.setHostAddresses(w.host);
  p.sync(w.st);
  auto outcomeNow = [&] { return toVip(p.committed.ruleset, w.env); };
  // No counts yet: every endpoint, at random.
  CHECK(outcomeNow() == "10.0.2.1:8080 1/3 from 10.0.1.5; 10.0.2.2:8080 1/3 from 10.0.1.5; 10.0.2.3:8080 1/3 from 10.0.1.5");
  const auto& ports = p.renderer.leastConnPorts();
  REQUIRE(ports.count("ns/lc"));
  REQUIRE(ports.at("ns/lc").size() == 1);
  CHECK(ports.at("ns/lc")[0].frontendIps == std::vector<std::string>{kVip});
  CHECK(ports.at("ns/lc")[0].sets[0].owner == kOwner);
  const uint64_t version = p.renderer.leastConnVersion();

  CHECK(p.renderer.choose("ns/lc", kOwner, {value("10.0.2.2", 8080)}));
  CHECK_FALSE(p.renderer.choose("ns/lc", kOwner, {value("10.0.2.2", 8080)}));
  CHECK(p.renderer.hasChoices());
  nft::Plan plan = p.sync(w.st);  // nothing in the journal: the chosen service alone
  CHECK_FALSE(p.renderer.hasChoices());
  for (const nft::Op& op : plan.txn.ops()) CHECK(op.kind == nft::Kind::Element);
  CHECK(plan.txn.size() == 4);  // slot 0 re-pointed (delete + add), slots 1 and 2 gone
  CHECK(outcomeNow() == "10.0.2.2:8080 from 10.0.1.5");
  CHECK(p.renderer.leastConnVersion() == version);  // the ports did not change

  // Two tie: both, at random; a choice naming an endpoint that left falls back to the others.
  p.renderer.choose("ns/lc", kOwner, {value("10.0.2.1", 8080), value("10.0.2.3", 8080)});
  p.sync(w.st);
  CHECK(outcomeNow() == "10.0.2.1:8080 1/2 from 10.0.1.5; 10.0.2.3:8080 1/2 from 10.0.1.5");
}

TEST_CASE("least connection: more endpoints than slots, affinity first, and a restart that keeps the kernel's choice") {
  std::vector<Ep> eps;
  for (int i = 1; i <= 20; ++i) eps.push_back({"10.0.2." + std::to_string(i)});
  state::ClusterState st = lcState("lc", eps);
  auto svc = st.services.at("ns/lc");
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  FakePipeline p(cfg);
  p.sync(st);
  size_t slots = 0;
  for (const auto& e : p.committed.ruleset.tables[0].parts.at("svc ns/lc")->elements) slots += e.set == "backends-tcp";
  CHECK(slots == services::kLeastConnSlots);  // the first 16 until a choice
  CHECK(p.committed.ruleset.tables[0].parts.at("svc ns/lc")->chains.empty());

  p.renderer.choose("ns/lc", kOwner, {value("10.0.2.7", 8080), value("10.0.2.19", 8080)});
  p.sync(st);
  nft::Plan plan = restartPlan(p, st, cfg);
  CHECK_FALSE(plan.needsFull);
  CHECK(plan.txn.empty());  // the two chosen slots are what a restart renders until a new choice

  // With ClientIP affinity the first pick stays random (its chain of its own, no choice).
  auto sticky = std::make_shared<api::Service>(*svc);
  sticky->sessionAffinity = "ClientIP";
  st.upsertService(sticky);
  p.sync(st);
  CHECK(p.renderer.leastConnPorts().count("ns/lc") == 0);
  CHECK(p.committed.ruleset.tables[0].parts.at("svc ns/lc")->chains.size() == 1);
}

namespace {

struct ChoiceRecorder : sync::ChoiceSource {
  int fd() const override { return -1; }
  bool take() override { return true; }
  void landed(const sync::SyncStats& s) override { landedOps.push_back(s.ops); }
  std::vector<size_t> landedOps;
};

struct CountingTarget : sync::SyncTarget {
  sync::SyncStats sync() override {
    ++syncs;
    sync::SyncStats s;
    s.ok = ok;
    return s;
  }
  sync::SyncStats syncChoices() override {
    ++choiceSyncs;
    sync::SyncStats s;
    s.ok = true;
    s.ops = 2;
    return s;
  }
  const std::set<std::string>* lastChanges() const override { return nullptr; }
  int syncs = 0, choiceSyncs = 0;
  bool ok = true;
};

struct SyncedSource : source::Source {
  bool start() override { return true; }
  int fd() const override { return -1; }
  bool processEvents() override { return false; }
  bool hasSynced() const override { return true; }
  std::string pending() const override { return ""; }
  std::map<std::string, sync::WallTime> takeTriggerTimes() override { return {}; }
  std::string describe() const override { return "synced"; }
};

struct Observed : sync::SyncObserver {
  void synced(const sync::SyncReport&) override { ++reports; }
  int reports = 0;
};

}  // namespace

TEST_CASE("least connection: the loop syncs choices at most every choiceGap, not held back by min-sync-period, unseen by observers") {
  sync::FakeClock clock;
  SyncedSource src;
  CountingTarget target;
  sync::LoopTimings t{1s, 30s};
  t.choiceGap = 5ms;
  sync::SyncLoop loop(clock, src, target, t);
  ChoiceRecorder choices;
  Observed seen;
  loop.setChoices(&choices);
  loop.addObserver(&seen);
  loop.step();  // the first sync
  REQUIRE(target.syncs == 1);
  clock.advance(10ms);
  loop.chosen();
  CHECK(loop.step() >= clock.now());
  CHECK(target.choiceSyncs == 1);  // at once: min-sync-period is for the cluster's changes
  CHECK(choices.landedOps == std::vector<size_t>{2});
  loop.chosen();
  auto next = loop.step();
  CHECK(target.choiceSyncs == 1);
  CHECK(next == clock.now() + 5ms);  // the gap
  clock.advance(5ms);
  loop.step();
  CHECK(target.choiceSyncs == 2);
  CHECK(seen.reports == 1);  // observers only hear of the regular sync
  CHECK(target.syncs == 1);

  // While the loop backs off after a failure, the regular retry carries them.
  target.ok = false;
  loop.changed();
  clock.advance(1s);
  loop.step();
  REQUIRE(loop.consecutiveFailures() == 1);
  loop.chosen();
  clock.advance(10ms);
  loop.step();
  CHECK(target.choiceSyncs == 2);
  target.ok = true;
  clock.advance(2s);
  loop.step();
  CHECK(loop.consecutiveFailures() == 0);
  CHECK(choices.landedOps.size() == 3);  // landed with the retry
  clock.advance(10ms);
  loop.step();
  CHECK(target.choiceSyncs == 2);
}

TEST_CASE("least connection: a choices sync commits the chosen services and leaves the cluster's changes to the next sync") {
  state::ClusterState st;
  auto svc = service("ns", "lc", {kVip}, {port("http", 80)});
  svc->meta.annotations[services::kSchedulerAnnotation] = "least-connection";
  st.upsertService(svc);
  st.upsertSlice(slice("ns", "lc-1", "lc", {epPort("http", 8080)}, {{"10.0.2.1"}, {"10.0.2.2"}}));
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  render::Renderer renderer(cfg);
  nft::FakeRunner kernel;
  sync::Syncer syncer(renderer, kernel);
  CHECK_FALSE(syncer.syncChoices(st).ok);  // before the first sync: the first sync carries them
  REQUIRE(syncer.sync(st).ok);

  // A cluster change waits for its sync; a choice does not.
  st.upsertService(service("ns", "other", {"172.30.0.31"}, {port("http", 80)}));
  renderer.choose("ns/lc", kOwner, {value("10.0.2.2", 8080)});
  sync::SyncStats s = syncer.syncChoices(st);
  CHECK(s.ok);
  CHECK(s.ops == 3);  // slot 0 re-pointed, slot 1 gone
  CHECK(st.changedServices == std::set<std::string>{"ns/other"});
  CHECK(kernel.tables["ip kube-proxy"].sets["backends-tcp"].elements.size() == 1);
  CHECK(kernel.tables["ip kube-proxy"].sets["cluster-ips"].elements.size() == 1);  // ns/other not yet
  CHECK(syncer.syncChoices(st).ops == 0);  // nothing new
  REQUIRE(syncer.sync(st).ok);
  CHECK(kernel.tables["ip kube-proxy"].sets["cluster-ips"].elements.size() == 2);
  CHECK(*syncer.lastChanges() == std::set<std::string>{"ns/other"});
}
