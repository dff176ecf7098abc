// Source hash keeps its promise at every endpoint count (issue 26, defect 1): one endpoint added or
// removed moves only that endpoint's share of the clients, whatever the count, growing or
// shrinking, across every change of the table's size; every endpoint holds an equal share; a
// restart keeps the table. Measured on the rendered elements, as the kernel would pick from them.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "nft/listing.h"
#include "pkg/services/scheduler.h"
#include "unit/fixtures.h"
#include "unit/pipeline.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

const char* kVip = "10.96.7.7";

services::NodeConfig shConfig() {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  cfg.clusterCidrV4 = net::parseCidr("10.244.0.0/16");
  return cfg;
}

std::string endpointIp(int i) { return "10.1." + std::to_string(i / 200) + "." + std::to_string(i % 200 + 1); }

void setEndpoints(state::ClusterState& st, const std::vector<int>& eps) {
  std::vector<Ep> list;
  for (int i : eps) list.push_back({endpointIp(i)});
  st.upsertSlice(slice("ns", "sh-x", "sh", {epPort("http", 8080)}, list));
}

std::vector<int> firstEndpoints(int n) {
  std::vector<int> eps;
  for (int i = 0; i < n; ++i) eps.push_back(i);
  return eps;
}

state::ClusterState shState(const std::vector<int>& eps) {
  state::ClusterState st;
  auto svc = service("ns", "sh", {kVip}, {port("http", 80)});
  svc->meta.annotations[services::kSchedulerAnnotation] = "source-hash";
  st.upsertService(svc);
  setEndpoints(st, eps);
  return st;
}

// The ClusterIP's slots as rendered (element value per slot, slots 0..M-1).
std::vector<std::string> slotsOf(const nft::Ruleset& rs) {
  std::map<uint32_t, std::string> bySlot;
  for (const nft::Element& e : rs.tables[0].parts.at("svc ns/sh")->elements) {
    if (e.set != "backends-tcp") continue;
    auto k = nft::splitSlotKey(std::string(e.key()));
    if (k && k->prefix.size() == 2 && k->prefix[0] == std::string("\"") + kVip + "\"") bySlot[k->slot] = e.value();
  }
  std::vector<std::string> out;
  for (const auto& [slot, value] : bySlot) {
    REQUIRE(slot == out.size());  // dense
    out.push_back(value);
  }
  return out;
}

// The share of client addresses whose endpoint differs between two tables. nft's `jhash ... mod M`
// is the kernel's reciprocal_scale: slot = hash * M >> 32, so slot s holds the hashes from
// ceil(s * 2^32 / M); tables of different sizes are compared over those ranges.
double movedShare(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  auto start = [](uint64_t slot, uint64_t m) { return ((slot << 32) + m - 1) / m; };
  const uint64_t end = 1ull << 32;
  uint64_t pos = 0, moved = 0, i = 0, j = 0;
  while (pos < end) {
    uint64_t next = std::min(start(i + 1, a.size()), start(j + 1, b.size()));
    if (a[i] != b[j]) moved += next - pos;
    pos = next;
    if (start(i + 1, a.size()) == pos) ++i;
    if (start(j + 1, b.size()) == pos) ++j;
  }
  return static_cast<double>(moved) / static_cast<double>(end);
}

// Every endpoint holds floor(M/N) or ceil(M/N) of the M slots, and M is at least 8 per endpoint.
void checkBalanced(const std::vector<std::string>& slots, size_t n) {
  std::map<std::string, size_t> count;
  for (const auto& v : slots) count[v]++;
  REQUIRE(count.size() == n);
  if (n < 2) return;
  const size_t m = slots.size();
  CHECK(m >= 8 * n);
  for (const auto& [value, c] : count) {
    INFO("N=" << n << " M=" << m << " " << value);
    CHECK(c >= m / n);
    CHECK(c <= (m + n - 1) / n);
  }
}

std::vector<nft::ListedTable> listKernel(FakePipeline& p) {
  std::vector<nft::ListedTable> listed = p.listBoth();
  return listed;
}

struct Step {
  std::vector<std::string> before, after;
  size_t nBefore, nAfter;
};

// The promise (docs/schedulers.md): at most the changed endpoint's share, 1/N + 1/M (N the larger
// count, M the table that holds the changed endpoint: the new one when it came, the old one when
// it left), and half a share more in the one change that halves the table.
void checkMoved(const Step& s, double* worstRatio, std::string* worstAt) {
  const size_t n = std::max(s.nBefore, s.nAfter);
  const size_t m = s.nAfter > s.nBefore ? s.after.size() : s.before.size();
  const double share = 1.0 / n + 1.0 / m;
  const bool halved = s.after.size() * 2 == s.before.size();
  const double bound = share * (halved ? 1.5 : 1.0);
  const double moved = movedShare(s.before, s.after);
  INFO(s.nBefore << " -> " << s.nAfter << " endpoints, table " << s.before.size() << " -> " << s.after.size()
                 << ": moved " << moved << " of the clients, bound " << bound);
  CHECK(moved <= bound + 1e-12);
  if (moved * n > *worstRatio) {
    *worstRatio = moved * n;
    *worstAt = std::to_string(s.nBefore) + " -> " + std::to_string(s.nAfter);
  }
}

}  // namespace

TEST_CASE("source hash: adding or removing one endpoint moves only its share, at every N from 1 to 120 and back") {
  std::vector<int> eps = {0};
  state::ClusterState st = shState(eps);
  FakePipeline p(shConfig());
  p.sync(st);
  std::vector<std::string> table = slotsOf(p.committed.ruleset);
  double worst = 0;
  std::string worstAt;
  int next = 1;
  auto step = [&](const std::vector<int>& now) {
    const size_t before = eps.size();
    eps = now;
    setEndpoints(st, eps);
    p.sync(st);
    std::vector<std::string> after = slotsOf(p.committed.ruleset);
    checkMoved({table, after, before, eps.size()}, &worst, &worstAt);
    checkBalanced(after, eps.size());
    table = std::move(after);
  };
  // Growing one endpoint at a time: every table size is crossed on the way.
  while (eps.size() < 120) {
    std::vector<int> grown = eps;
    grown.push_back(next++);
    step(grown);
  }
  // Shrinking, a pseudo-random endpoint at a time; every fifth step also replaces one (a rolling
  // update's swap at the same count).
  uint32_t lcg = 12345;
  auto pick = [&](size_t n) { return static_cast<size_t>((lcg = lcg * 1103515245u + 12345u) >> 16) % n; };
  for (int k = 0; eps.size() > 1; ++k) {
    std::vector<int> now = eps;
    now.erase(now.begin() + static_cast<long>(pick(now.size())));
    step(now);
    if (k % 5 == 4 && eps.size() > 1) {
      now = eps;
      now[pick(now.size())] = next++;
      step(now);
    }
  }
  MESSAGE("worst moved share x N: " << worst << " (" << worstAt << ")");
}

TEST_CASE("source hash: a restart adopts the table from the kernel, so it keeps every client where it was") {
  std::vector<int> eps = firstEndpoints(40);
  state::ClusterState st = shState(eps);
  FakePipeline p(shConfig());
  p.sync(st);
  // A history: removals and additions leave a table that a fresh render would not make.
  for (int i = 0; i < 12; ++i) {
    eps.erase(eps.begin() + (i * 7) % static_cast<long>(eps.size()));
    if (i % 2) eps.push_back(100 + i);
    setEndpoints(st, eps);
    p.sync(st);
  }
  const std::vector<std::string> before = slotsOf(p.committed.ruleset);
  const std::vector<nft::ListedTable> listed = listKernel(p);
  render::Renderer fresh(shConfig());
  fresh.adoptSlots(listed);
  const nft::Ruleset& rs = fresh.render(st, nullptr);
  CHECK(slotsOf(rs) == before);
  auto plan = nft::planReconcile(listed, rs);
  CHECK_FALSE(plan.needsFull);
  CHECK(plan.txn.empty());
}

TEST_CASE("source hash: an upgrade adopts the earlier layout's 251-slot Maglev table as it is") {
  std::vector<int> eps = firstEndpoints(7);
  state::ClusterState st = shState(eps);
  FakePipeline p(shConfig());
  p.sync(st);
  // The kernel holds the 251 slots an earlier version wrote: every endpoint 35 or 36 times, as
  // Maglev's round-robin fill leaves them, in an order of its own.
  auto& backends = p.kernel.tables["ip kube-proxy"].sets["backends-tcp"].elements;
  const std::vector<std::string> now = slotsOf(p.committed.ruleset);
  std::vector<std::string> values(now.begin(), now.end());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  for (size_t slot = 0; slot < now.size(); ++slot)
    backends.erase(nft::ex::concat({nft::ex::addr(kVip), nft::ex::number(80), nft::ex::number(slot)}).json);
  std::vector<std::string> old;
  for (size_t slot = 0; slot < 251; ++slot) {
    old.push_back(values[(slot * 3) % values.size()]);
    backends[nft::ex::concat({nft::ex::addr(kVip), nft::ex::number(80), nft::ex::number(slot)}).json] = {old.back(), {}};
  }
  const std::vector<nft::ListedTable> listed = listKernel(p);
  render::Renderer fresh(shConfig());
  fresh.adoptSlots(listed);
  CHECK(slotsOf(fresh.render(st, nullptr)) == old);
}
