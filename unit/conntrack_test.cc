// UDP conntrack cleanup (pkg/conntrack): which flows are stale given the services and their
// endpoints, the snapshot the sync loop hands over, the batched streaming pass against a fake
// conntrack table, and the worker that runs it off the sync thread (a newer snapshot supersedes
// one that has not started).
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <condition_variable>
#include <mutex>

#include "pkg/conntrack/cleanup_worker.h"
#include "pkg/conntrack/frontends.h"
#include "pkg/conntrack/gap_flows.h"
#include "pkg/conntrack/reconcile.h"
#include "pkg/conntrack/udp_services.h"
#include "pkg/metrics/proxy_metrics.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using conntrack::Flow;
using conntrack::Frontends;

namespace {

conntrack::Ip ip(const std::string& text) {
  uint8_t f = 0;
  auto v = conntrack::parseIp(text, &f);
  REQUIRE(v);
  return *v;
}

// A UDP flow from client:40000 to dst:dport whose replies come from replySrc.
Flow udp(const std::string& dst, uint16_t dport, const std::string& replySrc, const std::string& client = "10.244.9.9") {
  Flow f;
  uint8_t fam = 0;
  conntrack::parseIp(dst, &fam);
  f.family = fam;
  f.proto = IPPROTO_UDP;
  f.origSrc = ip(client);
  f.origDst = ip(dst);
  f.replySrc = ip(replySrc);
  f.origSport = 40000;
  f.origDport = dport;
  return f;
}

struct Cluster {
  state::ClusterState st;
  services::NodeConfig cfg;
  void add(std::shared_ptr<api::Service> svc, std::vector<std::shared_ptr<api::EndpointSlice>> slices) {
    st.upsertService(svc);
    for (auto& s : slices) st.upsertSlice(s);
  }
  conntrack::UdpSnapshot snapshot() {
    conntrack::UdpServiceIndex idx;
    idx.update(st, cfg, nullptr);
    return idx.snapshot();
  }
  Frontends frontends(uint8_t family = AF_INET) { return Frontends::build(*snapshot(), family); }
};

// The DNS service: UDP 53 -> 5353 on 10.96.0.10, with two endpoints.
std::shared_ptr<api::Service> dnsService() {
  return service("kube-system", "dns", {"10.96.0.10"}, {port("dns", 53, api::Protocol::UDP), port("tcp", 53)});
}
std::shared_ptr<api::EndpointSlice> dnsSlice(std::vector<Ep> eps) {
  return slice("kube-system", "dns-1", "dns", {epPort("dns", 5353, api::Protocol::UDP), epPort("tcp", 5353)}, eps);
}

// An in-memory conntrack table: dump streams its flows, destroy removes them.
struct FakeTable : conntrack::FlowTable {
  std::vector<Flow> flows;
  std::vector<size_t> batchSizes;
  std::string failDump;
  std::vector<std::pair<uint8_t, uint8_t>> dumped;  // (family, proto) of each dump
  bool dump(uint8_t family, uint8_t proto, const std::function<bool(const Flow&)>& fn, std::string* error) override {
    dumped.emplace_back(family, proto);
    std::vector<Flow> copy = flows;  // deletes during the dump must not disturb it
    for (const Flow& f : copy)
      if (f.family == family && f.proto == proto && !fn(f)) break;
    if (!failDump.empty()) *error = failDump;
    return failDump.empty();
  }
  size_t destroy(const std::vector<Flow>& batch, std::string*) override {
    batchSizes.push_back(batch.size());
    size_t n = 0;
    for (const Flow& d : batch)
      for (auto it = flows.begin(); it != flows.end(); ++it)
        if (it->origSrc == d.origSrc && it->origDst == d.origDst && it->origSport == d.origSport &&
            it->origDport == d.origDport) {
          flows.erase(it);
          ++n;
          break;
        }
    return n;
  }
};

}  // namespace

TEST_CASE("conntrack: a UDP flow to a ClusterIP whose reply source is no serving endpoint is stale") {
  Cluster c;
  c.add(dnsService(), {dnsSlice({{"10.244.0.5"}, {"10.244.0.6"}})});
  Frontends fe = c.frontends();
  CHECK_FALSE(fe.isStale(udp("10.96.0.10", 53, "10.244.0.5")));
  CHECK_FALSE(fe.isStale(udp("10.96.0.10", 53, "10.244.0.6")));
  CHECK(fe.isStale(udp("10.96.0.10", 53, "10.244.0.7")));  // the endpoint that went away
  // An entry whose packets went out un-DNATed (before the service was programmed): its reply source is the VIP.
  CHECK(fe.isStale(udp("10.96.0.10", 53, "10.96.0.10")));
  // Another port of the same IP, another IP, and TCP: not ours to judge.
  CHECK_FALSE(fe.isStale(udp("10.96.0.10", 54, "10.244.0.7")));
  CHECK_FALSE(fe.isStale(udp("10.96.0.11", 53, "10.244.0.7")));
  Flow tcp = udp("10.96.0.10", 53, "10.244.0.7");
  tcp.proto = IPPROTO_TCP;
  CHECK_FALSE(fe.isStale(tcp));
}

TEST_CASE("conntrack: external IPs, LoadBalancer VIPs and NodePorts are frontends too; Proxy-mode ingress is not") {
  Cluster c;
  auto svc = service("default", "game", {"10.96.0.20"}, {port("g", 7777, api::Protocol::UDP)});
  svc->type = "LoadBalancer";
  svc->ports[0].nodePort = 30777;
  svc->externalIPs = {"192.0.2.10"};
  svc->loadBalancerIngress = {{"198.51.100.1", "", "VIP"}, {"198.51.100.2", "", "Proxy"}};
  c.add(svc, {slice("default", "game-1", "game", {epPort("g", 7000, api::Protocol::UDP)}, {{"10.244.1.1"}})});
  Frontends fe = c.frontends();
  CHECK(fe.isStale(udp("192.0.2.10", 7777, "10.244.1.2")));
  CHECK(fe.isStale(udp("198.51.100.1", 7777, "10.244.1.2")));
  CHECK_FALSE(fe.isStale(udp("198.51.100.2", 7777, "10.244.1.2")));  // the LB proxies it: not DNATed here
  CHECK_FALSE(fe.isStale(udp("198.51.100.1", 7777, "10.244.1.1")));
  // As upstream: a NodePort on any destination address.
  CHECK(fe.isStale(udp("192.168.1.5", 30777, "10.244.1.2")));
  CHECK_FALSE(fe.isStale(udp("192.168.1.5", 30777, "10.244.1.1")));
}

TEST_CASE("conntrack: serving counts (terminating too), not ready-but-not-serving; no endpoints means no cleanup") {
  Cluster c;
  c.add(dnsService(), {dnsSlice({{"10.244.0.5", false, true, true}, {"10.244.0.6", false, false, true}})});
  Frontends fe = c.frontends();
  CHECK_FALSE(fe.isStale(udp("10.96.0.10", 53, "10.244.0.5")));  // serving and terminating: kept, like TCP
  CHECK(fe.isStale(udp("10.96.0.10", 53, "10.244.0.6")));

  Cluster none;
  none.add(dnsService(), {dnsSlice({})});
  CHECK(none.frontends().empty());  // its flows are rejected; deleting them would change nothing
}

TEST_CASE("conntrack: IPv6 frontends are their own family") {
  Cluster c;
  auto svc = service("kube-system", "dns", {"10.96.0.10", "fd00:96::a"}, {port("dns", 53, api::Protocol::UDP)});
  c.add(svc, {dnsSlice({{"10.244.0.5"}}),
              slice("kube-system", "dns-6", "dns", {epPort("dns", 5353, api::Protocol::UDP)}, {{"fd00:244::5"}}, "IPv6")});
  Frontends v6 = c.frontends(AF_INET6);
  CHECK(v6.isStale(udp("fd00:96::a", 53, "fd00:244::6", "fd00:244::9")));
  CHECK_FALSE(v6.isStale(udp("fd00:96::a", 53, "fd00:244::5", "fd00:244::9")));
  CHECK(v6.size() == 1);
  CHECK(c.frontends(AF_INET).size() == 1);
}

TEST_CASE("conntrack: a destination two Services claim belongs to the older one") {
  Cluster c;
  auto older = service("a", "old", {"10.96.0.30"}, {port("u", 500, api::Protocol::UDP)});
  older->externalIPs = {"192.0.2.50"};
  older->meta.creationTimestamp = "2024-01-01T00:00:00Z";
  auto newer = service("b", "new", {"10.96.0.31"}, {port("u", 500, api::Protocol::UDP)});
  newer->externalIPs = {"192.0.2.50"};
  newer->meta.creationTimestamp = "2025-01-01T00:00:00Z";
  c.add(newer, {slice("b", "new-1", "new", {epPort("u", 500, api::Protocol::UDP)}, {{"10.244.2.2"}})});
  c.add(older, {slice("a", "old-1", "old", {epPort("u", 500, api::Protocol::UDP)}, {{"10.244.2.1"}})});
  Frontends fe = c.frontends();
  CHECK_FALSE(fe.isStale(udp("192.0.2.50", 500, "10.244.2.1")));
  CHECK(fe.isStale(udp("192.0.2.50", 500, "10.244.2.2")));
}

TEST_CASE("conntrack: the snapshot changes only when a UDP service does") {
  Cluster c;
  c.add(dnsService(), {dnsSlice({{"10.244.0.5"}})});
  c.add(service("default", "web", {"10.96.0.40"}, {port("http", 80)}), {});
  conntrack::UdpServiceIndex idx;
  idx.update(c.st, c.cfg, nullptr);
  auto first = idx.snapshot();
  CHECK(first->size() == 1);
  CHECK(first->count("kube-system/dns") == 1);

  // A TCP-only service changes: the worker gets the same pointer, nothing was copied.
  c.st.upsertService(service("default", "web", {"10.96.0.40"}, {port("http", 8080)}));
  std::set<std::string> changed{"default/web"};
  idx.update(c.st, c.cfg, &changed);
  CHECK((idx.snapshot() == first));

  // The DNS slice changes: a new snapshot; the old one the worker may hold is untouched.
  c.st.upsertSlice(dnsSlice({{"10.244.0.6"}}));
  changed = {"kube-system/dns"};
  idx.update(c.st, c.cfg, &changed);
  auto second = idx.snapshot();
  REQUIRE((second != first));
  CHECK(first->at("kube-system/dns").slices.front()->endpoints.front().address == "10.244.0.5");
  CHECK(second->at("kube-system/dns").slices.front()->endpoints.front().address == "10.244.0.6");

  // Another proxy's service, and a deleted one, leave the snapshot.
  c.st.deleteService("kube-system", "dns");
  idx.update(c.st, c.cfg, &changed);
  CHECK(idx.snapshot()->empty());
  auto other = dnsService();
  other->meta.labels["service.kubernetes.io/service-proxy-name"] = "someone-else";
  c.st.upsertService(other);
  idx.update(c.st, c.cfg, nullptr);
  CHECK(idx.snapshot()->empty());
}

TEST_CASE("conntrack: one pass streams the table and deletes the stale flows in batches") {
  Cluster c;
  c.add(dnsService(), {dnsSlice({{"10.244.0.5"}})});
  Frontends fe = c.frontends();
  FakeTable t;
  for (int i = 0; i < 5; ++i) t.flows.push_back(udp("10.96.0.10", 53, "10.244.0.7", "10.244.9." + std::to_string(i + 1)));
  t.flows.push_back(udp("10.96.0.10", 53, "10.244.0.5"));       // to the live endpoint
  t.flows.push_back(udp("203.0.113.1", 9999, "203.0.113.1"));  // unrelated
  Flow v6 = udp("fd00::1", 53, "fd00::2", "fd00::3");
  t.flows.push_back(v6);  // other family: not in this pass

  auto r = conntrack::reconcileFamily(t, AF_INET, fe, 2);
  CHECK(r.error.empty());
  CHECK(r.scanned == 7);
  CHECK(r.stale == 5);
  CHECK(r.deleted == 5);
  CHECK(t.batchSizes == std::vector<size_t>{2, 2, 1});
  REQUIRE(t.flows.size() == 3);
  CHECK(t.flows[0].replySrc == ip("10.244.0.5"));
  CHECK(t.flows[1].origDst == ip("203.0.113.1"));

  // Nothing stale: nothing sent. A failed dump says so, after deleting what it saw.
  t.batchSizes.clear();
  CHECK(conntrack::reconcileFamily(t, AF_INET, fe, 2).deleted == 0);
  CHECK(t.batchSizes.empty());
  t.flows.push_back(udp("10.96.0.10", 53, "10.244.0.8"));
  t.failDump = "conntrack dump: No buffer space available";
  auto failed = conntrack::reconcileFamily(t, AF_INET, fe, 2);
  CHECK(failed.deleted == 1);
  CHECK(failed.error == t.failDump);

  // Cancelled (the daemon is stopping): the pass ends at the next entry, nothing more is deleted.
  t.failDump.clear();
  t.flows.push_back(udp("10.96.0.10", 53, "10.244.0.8"));
  std::atomic<bool> cancel{true};
  auto cancelled = conntrack::reconcileFamily(t, AF_INET, fe, 2, &cancel);
  CHECK(cancelled.scanned == 0);
  CHECK(cancelled.deleted == 0);
  CHECK(t.flows.size() == 4);
}

namespace {
// A table whose first dump blocks until released: the worker is busy while snapshots arrive.
struct GatedTable : conntrack::FlowTable {
  std::mutex* mu;
  std::condition_variable* cv;
  bool* open;
  std::atomic<int>* dumps;
  std::vector<std::chrono::steady_clock::time_point>* starts;  // of each IPv4 dump
  bool dump(uint8_t family, uint8_t, const std::function<bool(const Flow&)>& fn, std::string*) override {
    if (family == AF_INET) starts->push_back(std::chrono::steady_clock::now());
    if (family == AF_INET && dumps->fetch_add(1) == 0) {
      std::unique_lock<std::mutex> lock(*mu);
      cv->wait(lock, [this] { return *open; });
    }
    return true;
  }
  size_t destroy(const std::vector<Flow>&, std::string*) override { return 0; }
};
}  // namespace

TEST_CASE("conntrack: the worker runs off the caller's thread, a newer snapshot supersedes an unstarted one, "
          "and it rests as long as its last pass took") {
  std::vector<std::chrono::steady_clock::time_point> starts;  // written by the worker only, read after waitIdle
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> dumps{0};
  std::vector<size_t> frontendsSeen;
  std::mutex seenMu;
  conntrack::CleanupWorker worker(
      [&](std::string*) {
        auto t = std::make_unique<GatedTable>();
        t->mu = &mu, t->cv = &cv, t->open = &open, t->dumps = &dumps, t->starts = &starts;
        return std::unique_ptr<conntrack::FlowTable>(std::move(t));
      },
      [&](const char* family, const conntrack::FamilyResult&) {
        std::lock_guard<std::mutex> g(seenMu);
        frontendsSeen.push_back(std::string(family) == "IPv4" ? 4 : 6);
      });
  auto snapshotWith = [](int services) {
    Cluster c;
    for (int i = 0; i < services; ++i) {
      auto svc = service("ns", "s" + std::to_string(i), {"10.96.1." + std::to_string(i + 1)},
                         {port("u", 53, api::Protocol::UDP)});
      c.add(svc, {slice("ns", "s" + std::to_string(i) + "-1", "s" + std::to_string(i),
                        {epPort("u", 53, api::Protocol::UDP)}, {{"10.244.3." + std::to_string(i + 1)}})});
    }
    return c.snapshot();
  };
  worker.submit(snapshotWith(1));
  while (dumps.load() == 0) std::this_thread::yield();  // the first pass is running (and blocked)
  worker.submit(snapshotWith(2));
  worker.submit(snapshotWith(3));  // replaces the unstarted second
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a first pass of at least 50 ms
  const auto released = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> g(mu);
    open = true;
  }
  cv.notify_all();
  worker.waitIdle();
  CHECK(worker.passes() == 2);
  CHECK(dumps.load() == 2);  // IPv4 only: no IPv6 frontends, so no IPv6 dump at all
  REQUIRE(starts.size() == 2);
  // The first pass ran from before starts[0] to after `released`; the second waited as long again.
  CHECK(starts[1] - released >= released - starts[0]);
  std::lock_guard<std::mutex> g(seenMu);
  CHECK(frontendsSeen == std::vector<size_t>{4, 4});
}

TEST_CASE("conntrack: the follower hands over a snapshot after successful syncs only") {
  Cluster c;
  c.add(dnsService(), {dnsSlice({{"10.244.0.5"}})});
  std::atomic<int> opened{0};
  conntrack::CleanupWorker worker(
      [&](std::string* err) {
        ++opened;
        *err = "no conntrack here";
        return std::unique_ptr<conntrack::FlowTable>();
      },
      nullptr);
  conntrack::CleanupFollower follower(c.st, c.cfg, worker);
  sync::SyncReport failed;
  follower.synced(failed);
  worker.waitIdle();
  CHECK(worker.passes() == 0);
  sync::SyncReport ok;
  ok.stats.ok = true;
  follower.synced(ok);
  worker.waitIdle();
  CHECK(worker.passes() == 1);
  CHECK(opened.load() == 1);  // it could not open the table: logged, retried on the next sync
  follower.synced(ok);
  worker.waitIdle();
  CHECK(opened.load() == 2);
}

TEST_CASE("conntrack: the reconciler's metrics carry upstream's names, per family") {
  metrics::ProxyMetrics m({"v", "c"});
  sync::SyncReport synced;  // a pass follows a sync, which made the served families known (both)
  synced.stats.ok = true;
  m.synced(synced);
  m.observeConntrackReconcile("IPv4", 0.004, 3);
  m.observeConntrackReconcile("IPv6", 0.002, 0);
  m.observeConntrackReconcile("IPv4", 0.003, 2);
  const std::string text = m.scrape();
  CHECK(text.find("kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family=\"IPv4\"} 5\n") != std::string::npos);
  CHECK(text.find("kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family=\"IPv6\"} 0\n") != std::string::npos);
  CHECK(text.find("kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family=\"IPv4\"} 2\n") != std::string::npos);
  CHECK(text.find("kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family=\"IPv6\"} 1\n") != std::string::npos);
}

namespace {
// A TCP (or SCTP) entry from client:41000 to dst:dport, as the kernel makes it with no DNAT
// (replies would come from the destination itself) unless replySrc says otherwise.
Flow connection(uint8_t proto, const std::string& dst, uint16_t dport, bool replied, std::string replySrc = "",
                uint16_t replySport = 0) {
  Flow f = udp(dst, dport, replySrc.empty() ? dst : replySrc);
  f.proto = proto;
  f.origSport = 41000;
  f.replySport = replySport ? replySport : dport;
  f.replied = replied;
  return f;
}
}  // namespace

TEST_CASE("conntrack: after a rules rebuild, entries to a frontend without DNAT that never saw a reply go") {
  Cluster c;
  auto web = service("ns", "web", {"10.96.2.1", "fd00::2:1"}, {port("http", 80), port("assoc", 7777, api::Protocol::SCTP)});
  web->externalIPs = {"192.0.2.10"};
  web->ports[0].nodePort = 30080;
  c.add(web, {});  // no endpoints: such a service is swept too (a retransmitted SYN is rejected either way)
  c.add(dnsService(), {dnsSlice({{"10.244.0.5"}})});
  auto gap = conntrack::makeGapSweep(c.st, c.cfg);
  const auto& fe = gap->v4;
  CHECK(fe.hasProto(IPPROTO_TCP));
  CHECK(fe.hasProto(IPPROTO_SCTP));
  CHECK_FALSE(fe.hasProto(IPPROTO_UDP));  // the reconciler's
  CHECK(fe.isGapFlow(connection(IPPROTO_TCP, "10.96.2.1", 80, false)));
  CHECK(fe.isGapFlow(connection(IPPROTO_TCP, "192.0.2.10", 80, false)));   // external IP
  CHECK(fe.isGapFlow(connection(IPPROTO_TCP, "172.18.0.2", 30080, false)));  // NodePort, any address
  CHECK(fe.isGapFlow(connection(IPPROTO_SCTP, "10.96.2.1", 7777, false)));
  CHECK(fe.isGapFlow(connection(IPPROTO_TCP, "10.96.0.10", 53, false)));  // the DNS service's TCP port
  // Kept: a connection that was answered, one that was DNATed, another port or protocol, UDP.
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_TCP, "10.96.2.1", 80, true)));
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_TCP, "10.96.2.1", 80, false, "10.244.0.7", 8080)));
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_TCP, "10.96.2.1", 80, false, "10.96.2.1", 8080)));
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_TCP, "10.96.2.1", 81, false)));
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_SCTP, "10.96.2.1", 80, false)));
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_UDP, "10.96.0.10", 53, false)));
  CHECK_FALSE(fe.isGapFlow(connection(IPPROTO_TCP, "203.0.113.1", 80, false)));
  // IPv6 is its own family; a service another proxy serves is not ours to sweep.
  CHECK(gap->v6.isGapFlow(connection(IPPROTO_TCP, "fd00::2:1", 80, false)));
  CHECK_FALSE(gap->v6.isGapFlow(connection(IPPROTO_TCP, "10.96.2.1", 80, false)));
  auto other = service("ns", "other", {"10.96.2.2"}, {port("http", 80)});
  other->meta.labels["service.kubernetes.io/service-proxy-name"] = "someone-else";
  c.add(other, {});
  CHECK_FALSE(conntrack::makeGapSweep(c.st, c.cfg)->v4.isGapFlow(connection(IPPROTO_TCP, "10.96.2.2", 80, false)));
}

TEST_CASE("conntrack: the follower asks for the gap sweep after a sync that rebuilt rules, not after others") {
  Cluster c;
  c.add(service("ns", "web", {"10.96.2.1"}, {port("http", 80)}), {});
  FakeTable* table = nullptr;
  conntrack::CleanupWorker worker(
      [&](std::string*) {
        auto t = std::make_unique<FakeTable>();
        t->flows = {connection(IPPROTO_TCP, "10.96.2.1", 80, false), connection(IPPROTO_TCP, "10.96.2.1", 80, true)};
        t->flows[1].origSport = 41001;
        table = t.get();
        return std::unique_ptr<conntrack::FlowTable>(std::move(t));
      },
      nullptr);
  conntrack::CleanupFollower follower(c.st, c.cfg, worker);
  sync::SyncReport incremental;
  incremental.stats.ok = true;
  incremental.stats.plan = sync::SyncStats::Plan::Incremental;
  incremental.stats.ops = 3;
  follower.synced(incremental);
  worker.waitIdle();
  CHECK(table == nullptr);  // no UDP service, no rebuild: nothing opened, nothing dumped
  sync::SyncReport intact = incremental;  // a start-up or repair that found the kernel as it wanted
  intact.stats.plan = sync::SyncStats::Plan::Reconcile;
  intact.stats.ops = 0;
  follower.synced(intact);
  worker.waitIdle();
  CHECK(table == nullptr);
  sync::SyncReport rebuilt = intact;
  rebuilt.stats.ops = 166;
  follower.synced(rebuilt);
  worker.waitIdle();
  REQUIRE(table != nullptr);
  CHECK(table->dumped == std::vector<std::pair<uint8_t, uint8_t>>{{AF_INET, IPPROTO_TCP}});
  REQUIRE(table->flows.size() == 1);
  CHECK(table->flows[0].replied);  // the answered connection stays
  sync::SyncReport full = rebuilt;
  full.stats.plan = sync::SyncStats::Plan::Full;
  follower.synced(full);
  worker.waitIdle();
  CHECK(table->dumped.size() == 2);
}
