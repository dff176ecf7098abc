// Who gets a connection on the daemon's HTTP ports (pkg/http/admission.h), as a table of
// decisions: per-source caps, idle connections evicted first near the budget, the heaviest
// source making room at it, slow senders after a grace, this host always served. Real sockets:
// http_server_test.cc and e2e/test_76_health_under_abuse.py.
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <map>
#include <random>

#include "pkg/http/admission.h"

using namespace kpn;
using namespace std::chrono_literals;
using http::Admission;
using http::AdmissionLimits;
using http::Peer;

namespace {

http::Address16 addr(const std::string& ip) {
  http::Address16 out{};
  if (ip.find(':') == std::string::npos) {
    out[10] = out[11] = 0xff;
    inet_pton(AF_INET, ip.c_str(), out.data() + 12);
  } else {
    inet_pton(AF_INET6, ip.c_str(), out.data());
  }
  return out;
}

const http::Address16 kNode = addr("192.168.100.1");
Peer from(const std::string& ip) { return http::peerOf(addr(ip), kNode); }
const Admission::Time t0 = Admission::Time{} + 1h;

AdmissionLimits limits(size_t total, size_t perSource, size_t local) {
  AdmissionLimits l;
  l.total = total;
  l.perSource = perSource;
  l.local = local;
  return l;  // grace: 1 s
}

}  // namespace

TEST_CASE("admission: this host is loopback or the connection's own address; an IPv6 source is its /64") {
  CHECK(from("127.0.0.1").local);
  CHECK(from("127.3.2.1").local);
  CHECK(from("::1").local);
  CHECK(from("192.168.100.1").local);  // the kubelet probing the node IP, from the node IP
  CHECK_FALSE(from("192.168.100.7").local);
  CHECK_FALSE(from("fd00::1").local);
  CHECK(from("203.0.113.2").source == addr("203.0.113.2"));
  CHECK(from("2001:db8:1:2:aaaa::1").source == from("2001:db8:1:2:bbbb::9").source);
  CHECK_FALSE(from("2001:db8:1:2::1").source == from("2001:db8:1:3::1").source);
  CHECK(from("2001:db8:1:2:aaaa::1").source == addr("2001:db8:1:2::"));
}

TEST_CASE("admission: the budget's shares") {
  auto l = AdmissionLimits::forBudget(16384);
  CHECK(l.total == 16384);
  CHECK(l.perSource == 32);
  CHECK(l.local == 128);
  CHECK(l.highWater() == 16384 - 1024);
  l = AdmissionLimits::forBudget(384);  // a soft limit of 1024 descriptors
  CHECK(l.perSource == 24);
  CHECK(l.local == 48);
  l = AdmissionLimits::forBudget(64);
  CHECK(l.perSource == 4);
  CHECK(l.local == 8);
  CHECK(l.highWater() == 60);
}

TEST_CASE("admission: a source at its cap makes room from its own longest idle connection, else is refused") {
  Admission a(limits(100, 3, 8));
  for (Admission::Id id : {1, 2, 3}) CHECK(a.admit(id, from("198.18.0.1"), t0).admitted);
  a.busy(1, t0);
  a.busy(2, t0);
  a.idle(2, t0 + 1ms);  // answered: idle since after 3
  auto d = a.admit(4, from("198.18.0.1"), t0 + 2ms);
  CHECK(d.admitted);
  CHECK(d.evict == std::vector<Admission::Id>{3});
  for (Admission::Id id : {2, 4}) a.busy(id, t0 + 2ms);
  d = a.admit(5, from("198.18.0.1"), t0 + 1min);  // all three mid-request: the newcomer waits its turn
  CHECK_FALSE(d.admitted);
  CHECK(d.evict.empty());
  CHECK(a.admit(6, from("198.18.0.2"), t0).admitted);  // another source is not affected
  CHECK(a.admit(7, from("2001:db8:1:2::1"), t0).admitted);
  CHECK(a.open() == 5);
  CHECK(a.sources() == 3);
  a.closed(3);  // evicted already: nothing happens
  a.closed(5);  // never admitted: nothing happens
  CHECK(a.open() == 5);
}

TEST_CASE("admission: near the budget a newcomer takes the heaviest source's idle connection, or one idle for the grace") {
  Admission a(limits(20, 8, 8));  // high water 19
  Admission::Id id = 1;
  for (int i = 0; i < 8; ++i) a.admit(id++, from("198.18.0.1"), t0);
  for (Admission::Id i = 1; i < id; ++i) a.busy(i, t0);  // the heavy source's connections are mid-request
  for (int i = 0; i < 6; ++i) a.admit(id++, from("198.18.0.2"), t0);  // 9..14, idle
  for (int i = 0; i < 4; ++i) a.admit(id++, from("198.18.0.3"), t0);  // 15..18, idle
  CHECK(a.admit(id++, from("203.0.113.2"), t0).evict.empty());    // 19: below the high water
  a.busy(19, t0);
  // At the high water: the heaviest has nothing idle, and nobody has been idle for a second yet
  // (their requests may be on their way): there is room, nobody goes.
  auto d = a.admit(id++, from("203.0.113.3"), t0 + 500ms);
  CHECK(d.admitted);
  CHECK(d.evict.empty());
  // At the budget, a second later: the longest idle one has waited long enough.
  d = a.admit(id++, from("203.0.113.4"), t0 + 2s);
  CHECK(d.admitted);
  CHECK(d.evict == std::vector<Admission::Id>{9});
  a.idle(3, t0 + 2s);  // the heaviest source now has an idle one: it goes first, however fresh
  d = a.admit(id++, from("203.0.113.5"), t0 + 2s);
  CHECK(d.evict == std::vector<Admission::Id>{3});
  CHECK(a.open() == 20);
}

TEST_CASE("admission: at the budget the heaviest source makes room, then a slow sender; else the newcomer is refused") {
  Admission a(limits(6, 4, 8));  // high water 5
  for (Admission::Id id : {1, 2, 3, 4}) a.admit(id, from("198.18.0.1"), t0), a.busy(id, t0);
  a.admit(5, from("198.18.0.2"), t0), a.busy(5, t0);
  a.admit(6, from("198.18.0.3"), t0), a.busy(6, t0);
  auto d = a.admit(7, from("203.0.113.2"), t0);  // 0 + 1 < 4: the heavy source's oldest goes
  CHECK(d.admitted);
  CHECK(d.evict == std::vector<Admission::Id>{1});
  a.busy(7, t0);
  d = a.admit(8, from("198.18.0.2"), t0);  // 1 + 1 < 3: again
  CHECK(d.evict == std::vector<Admission::Id>{2});
  a.busy(8, t0);
  // 198.18.0.1 and .2 hold 2 each, .3 and 203.0.113.2 one each: a newcomer from .3 would hold
  // as much as the heaviest, and nobody has been sending for a second: it waits.
  d = a.admit(9, from("198.18.0.3"), t0 + 999ms);
  CHECK_FALSE(d.admitted);
  CHECK(d.evict.empty());
  // A second on, the request under way longest (3's) is a slow sender's.
  d = a.admit(10, from("198.18.0.3"), t0 + 1s);
  CHECK(d.admitted);
  CHECK(d.evict == std::vector<Admission::Id>{3});
  CHECK(a.open() == 6);
}

TEST_CASE("admission: a prober's fresh connection is never the one that makes room, at the budget of busy senders") {
  Admission a(limits(40, 8, 8));
  Admission::Id id = 1;
  for (int s = 0; s < 5; ++s)
    for (int i = 0; i < 8; ++i) a.admit(id, from("198.18.0." + std::to_string(s)), t0), a.busy(id++, t0);
  Admission::Id prober = id++;
  auto now = t0 + 5s;
  REQUIRE(a.admit(prober, from("203.0.113.2"), now).admitted);
  for (int i = 0; i < 200; ++i) {  // the senders reconnect as fast as they are cut
    now += 1ms;
    auto d = a.admit(id, from("198.18.0." + std::to_string(i % 5)), now);
    CHECK(std::find(d.evict.begin(), d.evict.end(), prober) == d.evict.end());
    if (d.admitted) a.busy(id, now);
    ++id;
  }
  a.busy(prober, now);  // its request arrives; answered, it leaves
  a.closed(prober);
}

TEST_CASE("admission: this host is always served; beyond its own cap its longest idle, else oldest, connection goes") {
  Admission a(limits(2, 1, 3));
  a.admit(100, from("203.0.113.2"), t0);
  a.busy(100, t0);
  a.admit(101, from("203.0.113.3"), t0);
  a.busy(101, t0);  // the outside budget is full and busy
  for (Admission::Id id : {1, 2, 3}) CHECK(a.admit(id, from("127.0.0.1"), t0).admitted);
  a.busy(1, t0), a.busy(3, t0);
  auto d = a.admit(4, from("::1"), t0);
  CHECK(d.admitted);
  CHECK(d.evict == std::vector<Admission::Id>{2});  // the idle one
  a.busy(4, t0);
  d = a.admit(5, from("192.168.100.1"), t0);
  CHECK(d.admitted);
  CHECK(d.evict == std::vector<Admission::Id>{1});  // none idle: the oldest
  CHECK(a.openLocal() == 3);
  CHECK(a.open() == 2);
}

TEST_CASE("admission: the issue's floods in miniature: a prober from elsewhere is always admitted") {
  auto l = AdmissionLimits::forBudget(384);
  SUBCASE("10 000 connections from one source, mid-request") {
    Admission a(l);
    Admission::Id id = 1;
    size_t held = 0;
    auto now = t0;
    for (int i = 0; i < 10000; ++i, now += 1ms) {
      auto d = a.admit(id, from("198.18.0.10"), now);
      if (d.admitted) a.busy(id, now), ++held;
      held -= d.evict.size();
      ++id;
    }
    CHECK(a.open() == l.perSource);
    CHECK(held == l.perSource);
    CHECK(a.admit(id++, from("203.0.113.2"), now).admitted);
  }
  SUBCASE("100 sources, each as many as it may, idle or mid-request") {
    for (bool busy : {false, true}) {
      Admission a(l);
      Admission::Id id = 1;
      auto now = t0;
      for (int round = 0; round < 100; ++round)
        for (int s = 0; s < 100; ++s, now += 100us) {
          auto d = a.admit(id, from("198.18.1." + std::to_string(s)), now);
          if (d.admitted && busy) a.busy(id, now);
          ++id;
        }
      CHECK(a.open() <= l.total);
      for (int probe = 0; probe < 100; ++probe, now += 10ms) {
        auto d = a.admit(id, from("203.0.113.2"), now);
        CHECK(d.admitted);
        a.busy(id, now);
        a.closed(id++);  // answered and closed, as a load balancer's probe
      }
    }
  }
}

TEST_CASE("admission: random traffic keeps every count right and every cap") {
  std::mt19937 rng(24);
  auto l = limits(50, 6, 5);
  Admission a(l);
  struct Model {
    bool local;
    std::string src;
  };
  std::map<Admission::Id, Model> open;  // what the server would hold
  Admission::Id next = 1;
  auto now = t0;
  for (int step = 0; step < 20000; ++step) {
    now += std::chrono::milliseconds(rng() % 50);
    int op = static_cast<int>(rng() % 10);
    if (op < 5 || open.empty()) {
      int s = static_cast<int>(rng() % 20);
      std::string ip = s == 0 ? "127.0.0.1" : "198.18.0." + std::to_string(s);
      Admission::Id id = next++;
      auto d = a.admit(id, from(ip), now);
      for (auto v : d.evict) REQUIRE(open.erase(v) == 1);
      if (d.admitted) open[id] = {s == 0, ip};
    } else {
      auto it = std::next(open.begin(), static_cast<long>(rng() % open.size()));
      if (op < 7) a.busy(it->first, now);
      else if (op < 9) a.idle(it->first, now);
      else a.closed(it->first), open.erase(it);
    }
    size_t outside = 0, local = 0;
    std::map<std::string, size_t> per;
    for (const auto& [id, m] : open) (m.local ? local : outside)++, per[m.src]++;
    REQUIRE(a.open() == outside);
    REQUIRE(a.openLocal() == local);
    REQUIRE(outside <= l.total);
    REQUIRE(local <= l.local);
    for (const auto& [src, n] : per)
      if (src != "127.0.0.1") REQUIRE(n <= l.perSource);
  }
}
