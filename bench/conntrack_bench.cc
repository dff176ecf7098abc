// The UDP conntrack reconciler at scale, against the real kernel table: run it in a network
// namespace of its own (`make bench-conntrack` does: `unshare -n`). Builds a cluster state of
// --services UDP services with --endpoints each, fills the namespace's conntrack table with
// --entries UDP flows to them (created through netlink in batches; --stale of them with a reply
// source that is no endpoint any more), then times what the daemon's worker does after a sync:
// the snapshot, the frontends, the streamed dump and the batched deletes. Prints one JSON line.
// The same state and flows as bench/conntrack_daemon_bench.py writes for the daemon itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "pkg/conntrack/frontends.h"
#include "pkg/conntrack/netlink_table.h"
#include "pkg/conntrack/reconcile.h"
#include "pkg/conntrack/udp_services.h"
#include "pkg/state/cluster_state.h"

using namespace kpn;

namespace {

long statusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string want = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, want.size(), want) == 0) return std::atol(line.c_str() + want.size());
  return -1;
}

std::string v4(uint32_t base, uint32_t i) {
  in_addr a{htonl(base + i)};
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

conntrack::Ip ipOf(const std::string& s) {
  uint8_t f;
  return *conntrack::parseIp(s, &f);
}

// CPU time of this process (the kernel's dump and deletes run in its context, as system time):
// on a shared machine the wall time of a pass mostly measures the run queue.
double cpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

uint32_t arg(int argc, char** argv, const std::string& name, uint32_t def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return static_cast<uint32_t>(std::atol(argv[i + 1]));
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t services = arg(argc, argv, "services", 10000);
  const uint32_t endpoints = arg(argc, argv, "endpoints", 3);
  const uint32_t entries = arg(argc, argv, "entries", 100000);
  const uint32_t stale = arg(argc, argv, "stale", 10000);
  const uint32_t tcp = arg(argc, argv, "tcp", 0);  // TCP entries besides: the kernel filter drops them
  const uint32_t svcBase = ntohl(inet_addr("10.96.0.10")), epBase = ntohl(inet_addr("10.244.0.10")),
                 clientBase = ntohl(inet_addr("10.250.0.1"));

  state::ClusterState st;
  for (uint32_t s = 0; s < services; ++s) {
    auto svc = std::make_shared<api::Service>();
    svc->meta.ns = "bench";
    svc->meta.name = "dns" + std::to_string(s);
    svc->clusterIPs = {v4(svcBase, s)};
    svc->ports.push_back({"dns", api::Protocol::UDP, 53, 0, "5353"});
    auto slice = std::make_shared<api::EndpointSlice>();
    slice->meta.ns = "bench";
    slice->meta.name = svc->meta.name + "-1";
    slice->serviceName = svc->meta.name;
    slice->addressType = "IPv4";
    slice->ports.push_back({"dns", api::Protocol::UDP, 5353});
    for (uint32_t e = 0; e < endpoints; ++e) {
      api::Endpoint ep;
      ep.address = v4(epBase, s * endpoints + e);
      slice->endpoints.push_back(ep);
    }
    st.upsertService(svc);
    st.upsertSlice(slice);
  }

  std::string err;
  auto table = conntrack::NetlinkFlowTable::open(&err);
  if (!table) {
    std::cerr << "cannot open conntrack: " << err << "\n";
    return 1;
  }
  // Flows: client k -> service k % services; the first `stale` answer from an address that is no
  // endpoint (as after the endpoint was removed), the rest from one of the service's endpoints.
  auto tFill = std::chrono::steady_clock::now();
  size_t created = 0;
  std::vector<std::pair<conntrack::Flow, conntrack::Flow>> batch;
  for (uint32_t k = 0; k < entries + tcp; ++k) {
    const uint32_t s = k % services;
    conntrack::Flow o;
    o.family = AF_INET;
    o.proto = k < entries ? IPPROTO_UDP : IPPROTO_TCP;
    o.origSrc = ipOf(v4(clientBase, k / 50000));
    o.origDst = ipOf(v4(svcBase, s));
    o.origSport = static_cast<uint16_t>(10000 + k % 50000);
    o.origDport = 53;
    conntrack::Flow r = o;  // the reply direction: endpoint:5353 -> client
    r.origSrc = k < stale ? ipOf(v4(ntohl(inet_addr("10.240.0.1")), k)) : ipOf(v4(epBase, s * endpoints + k % endpoints));
    r.origDst = o.origSrc;
    r.origSport = 5353;
    r.origDport = o.origSport;
    batch.emplace_back(o, r);
    if (batch.size() == conntrack::kDeleteBatch || k + 1 == entries + tcp) {
      created += table->create(batch, 600, &err);
      batch.clear();
      if (!err.empty()) {
        std::cerr << "create: " << err << "\n";
        return 1;
      }
    }
  }
  const double fillMs = msSince(tFill);
  // --fill-only 1: leave the entries for a daemon in this namespace (bench/conntrack_daemon_bench.py).
  if (arg(argc, argv, "fill-only", 0)) {
    std::printf("{\"entries_created\": %zu, \"fill_ms\": %.0f}\n", created, fillMs);
    return created == entries + tcp ? 0 : 1;
  }

  const long rssBefore = statusKb("VmRSS"), hwmBefore = statusKb("VmHWM");
  auto t0 = std::chrono::steady_clock::now();
  conntrack::UdpServiceIndex index;
  services::NodeConfig cfg;
  index.update(st, cfg, nullptr);
  const double snapshotMs = msSince(t0);
  auto t1 = std::chrono::steady_clock::now();
  conntrack::Frontends fe = conntrack::Frontends::build(*index.snapshot(), AF_INET);
  const double frontendsMs = msSince(t1);
  const long rssBeforePass = statusKb("VmRSS");
  const size_t received0 = table->received();
  const double cpu0 = cpuMs();
  auto first = conntrack::reconcileFamily(*table, AF_INET, fe);
  const double firstCpu = cpuMs() - cpu0;
  const size_t receivedFirst = table->received() - received0;
  const long hwmAfter = statusKb("VmHWM"), rssAfter = statusKb("VmRSS");
  // The steady state: the next sync's pass over a table with nothing stale.
  const double cpu1 = cpuMs();
  auto second = conntrack::reconcileFamily(*table, AF_INET, fe);
  const double secondCpu = cpuMs() - cpu1;
  std::printf(
      "{\"services\": %u, \"endpoints_each\": %u, \"entries_created\": %zu, \"fill_ms\": %.0f, \"snapshot_ms\": %.1f, "
      "\"frontends_ms\": %.1f, \"pass_ms\": %.1f, \"pass_cpu_ms\": %.1f, \"tcp_entries\": %u, \"received_from_kernel\": %zu, \"scanned\": %zu, \"stale\": %zu, \"deleted\": %zu, "
      "\"second_pass_ms\": %.1f, \"second_pass_cpu_ms\": %.1f, \"second_scanned\": %zu, \"second_deleted\": %zu, \"error\": \"%s\", "
      "\"rss_kb_before\": %ld, \"rss_kb_before_pass\": %ld, \"rss_kb_after\": %ld, \"hwm_kb_before\": %ld, \"hwm_kb_after\": %ld}\n",
      services, endpoints, created, fillMs, snapshotMs, frontendsMs, first.seconds * 1000, firstCpu, tcp, receivedFirst, first.scanned, first.stale,
      first.deleted, second.seconds * 1000, secondCpu, second.scanned, second.deleted, (first.error + second.error).c_str(),
      rssBefore, rssBeforePass, rssAfter, hwmBefore, hwmAfter);
  return first.error.empty() && first.deleted == stale && second.deleted == 0 ? 0 : 1;
}
