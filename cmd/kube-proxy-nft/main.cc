// kube-proxy-nft: makes Service traffic work on this node with one atomic nftables ruleset.
// Wiring only: flags -> source -> store -> syncer; each piece lives in pkg/ or nft/.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "nft/diff.h"
#include "nft/runner.h"
#include "pkg/health/health_check_ports.h"
#include "pkg/http/server.h"
#include "pkg/kube/client_config.h"
#include "pkg/kube/cpprest_transport.h"
#include "pkg/net/ip.h"
#include "pkg/render/render.h"
#include "pkg/source/api_source.h"
#include "pkg/source/manifest_dir.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/duration.h"
#include "pkg/sync/syncer.h"

DEFINE_string(manifests, "", "Folder of Service/EndpointSlice/Node manifests (YAML or JSON) to use as the cluster state");
DEFINE_string(kubeconfig, "", "Path to a kubeconfig file: get the cluster state from that API server");
DEFINE_string(master, "", "Address of the Kubernetes API server (overrides the kubeconfig's server)");
DEFINE_string(kubeconfig_context, "", "kubeconfig context to use instead of its current-context");
DEFINE_double(kube_api_qps, 5, "Requests per second to the API server (client-side rate limit)");
DEFINE_int32(kube_api_burst, 10, "Burst of requests to the API server above --kube-api-qps");
DEFINE_string(service_account_dir, "/var/run/secrets/kubernetes.io/serviceaccount",
              "In a pod: where the service-account token and ca.crt are mounted");
DEFINE_string(hostname_override, "", "This node's name; endpoints with this nodeName are local (default: the hostname)");
DEFINE_string(cluster_cidr, "", "Pod CIDRs (at most one per family, comma separated); traffic from outside them to a ClusterIP is masqueraded");
DEFINE_bool(masquerade_all, false, "Masquerade all traffic sent to ClusterIPs");
DEFINE_string(min_sync_period, "1s", "Minimum time between syncs (Go duration); 0 syncs on every change");
DEFINE_string(sync_period, "30s", "Maximum time between syncs, and the retry ceiling after a failure (Go duration)");
DEFINE_string(iptables_min_sync_period, "", "Upstream's name for --min-sync-period");
DEFINE_string(iptables_sync_period, "", "Upstream's name for --sync-period");
DEFINE_string(nodeport_addresses, "primary",
              "Addresses NodePorts answer on: \"primary\" (the Node's primary InternalIP per family; without a Node "
              "object, the addresses of the default route's interface) or comma-separated CIDRs of local addresses "
              "(0.0.0.0/0, ::/0: all); never loopback");
DEFINE_string(detect_local_mode, "ClusterCIDR",
              "How traffic from local pods is recognised: ClusterCIDR (--cluster-cidr), NodeCIDR (the Node's "
              "podCIDRs), BridgeInterface (--pod-bridge-interface), InterfaceNamePrefix (--pod-interface-name-prefix)");
DEFINE_string(pod_bridge_interface, "", "With --detect-local-mode=BridgeInterface: the bridge the pods are attached to");
DEFINE_string(pod_interface_name_prefix, "",
              "With --detect-local-mode=InterfaceNamePrefix: the name prefix of the pods' host-side interfaces");
DEFINE_bool(dry_run, false, "Print the complete desired ruleset for both families as nft text and exit");
DEFINE_bool(cleanup, false, "Delete the ip and ip6 kube-proxy tables and exit");

namespace {

using Clock = std::chrono::steady_clock;

std::string flagOrAlias(const char* name, const char* alias, const std::string& value, const std::string& aliasValue) {
  gflags::CommandLineFlagInfo info;
  if (gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default) return value;
  return aliasValue.empty() ? value : aliasValue;
}

std::chrono::nanoseconds durationFlag(const char* name, const std::string& text) {
  auto d = kpn::sync::parseGoDuration(text);
  if (!d) {
    std::cerr << "invalid duration for --" << name << ": \"" << text << "\" (use Go syntax: 0s, 250ms, 1m)\n";
    std::exit(2);
  }
  return *d;
}

std::string defaultNodeName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  std::string s = buf;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Picks the source the flags name: a manifest folder, an API server from --kubeconfig/--master,
// or the in-cluster API server. Exits 2 with one line when none applies or the config is bad.
std::unique_ptr<kpn::source::Source> makeSource(const std::string& nodeName, kpn::state::ClusterState& state) {
  if (!FLAGS_manifests.empty()) return std::make_unique<kpn::source::ManifestDir>(FLAGS_manifests, nodeName, state);
  kpn::kube::ClientConfig cfg;
  cfg.qps = FLAGS_kube_api_qps;
  cfg.burst = FLAGS_kube_api_burst;
  std::optional<std::string> err;
  if (!FLAGS_kubeconfig.empty()) {
    err = kpn::kube::loadKubeconfig(FLAGS_kubeconfig, FLAGS_kubeconfig_context, cfg);
  } else if (FLAGS_master.empty()) {
    if (!std::getenv("KUBERNETES_SERVICE_HOST")) {
      std::cerr << "no cluster-state source: give --manifests=DIR, --kubeconfig=FILE or --master=URL, "
                   "or run in a pod (KUBERNETES_SERVICE_HOST)\n";
      std::exit(2);
    }
    err = kpn::kube::inClusterConfig([](const char* n) { return std::getenv(n); }, FLAGS_service_account_dir, cfg);
  }
  if (!err && !FLAGS_master.empty()) err = kpn::kube::normaliseServer(FLAGS_master, cfg.server);
  if (err) {
    std::cerr << *err << "\n";
    std::exit(2);
  }
  return std::make_unique<kpn::source::ApiSource>(kpn::kube::makeCpprestTransport(cfg), nodeName, state);
}

// The API source fills the state in the background: a dry run waits for the first full list.
bool waitSynced(kpn::source::Source& source, int sigfd, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (!source.hasSynced()) {
    if (Clock::now() > deadline) return false;
    pollfd fds[2] = {{source.fd(), POLLIN, 0}, {sigfd, POLLIN, 0}};
    poll(fds, 2, 100);
    if (fds[1].revents & POLLIN) return false;  // interrupted
    source.processEvents();
  }
  return true;
}

// Network programming latency: from the change that triggered an endpoint update (the
// EndpointSlice's last-change-trigger-time) to its rules being committed.
void logProgrammingLatency(const std::map<std::string, std::chrono::system_clock::time_point>& triggers) {
  if (triggers.empty() || !VLOG_IS_ON(2)) return;
  auto now = std::chrono::system_clock::now();
  double maxMs = 0;
  for (const auto& [svc, t] : triggers) maxMs = std::max(maxMs, std::chrono::duration<double, std::milli>(now - t).count());
  VLOG(2) << "network programming: " << triggers.size() << " services, max latency " << maxMs << " ms since trigger";
}

int runDryRun(kpn::render::Renderer& renderer, const kpn::state::ClusterState& st) {
  kpn::nft::Ruleset rs = renderer.render(st, nullptr);
  kpn::nft::Plan plan = kpn::nft::planReconcile({}, rs);  // against empty tables: everything is added
  std::cout << kpn::nft::staticDeclarationsText(rs) << plan.txn.toText();
  return 0;
}

int runCleanup() {
  kpn::nft::NftRunner runner;
  int rc = 0;
  for (auto f : {kpn::nft::Family::IPv4, kpn::nft::Family::IPv6}) {
    auto r = runner.deleteTable(f, "kube-proxy");
    if (!r.ok) {
      LOG(ERROR) << "cannot delete table " << kpn::nft::familyName(f) << " kube-proxy: " << r.error;
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("kube-proxy-nft (--manifests=DIR | --kubeconfig=FILE | --master=URL | in a pod) [flags]: Kubernetes Services on this node, as one nftables ruleset");
  FLAGS_logtostderr = true;
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  // Big short-lived buffers (list bodies and their JSON trees, transactions) straight from mmap,
  // so they go back to the system when freed. glibc's default threshold rises to 32 MiB after
  // the first such buffer is freed, after which they land in the heap between long-lived
  // objects and keep its pages resident.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);

  if (FLAGS_cleanup) return runCleanup();

  kpn::render::NodeConfig cfg;
  cfg.nodeName = FLAGS_hostname_override.empty() ? defaultNodeName() : FLAGS_hostname_override;
  cfg.masqueradeAll = FLAGS_masquerade_all;
  if (auto err = kpn::render::parseClusterCidrs(FLAGS_cluster_cidr, cfg)) {
    std::cerr << *err << "\n";
    return 2;
  }
  for (const auto& w : kpn::render::parseNodePortAddresses(FLAGS_nodeport_addresses, cfg)) LOG(WARNING) << w;
  if (auto err = kpn::render::parseDetectLocal(FLAGS_detect_local_mode, FLAGS_pod_bridge_interface,
                                               FLAGS_pod_interface_name_prefix, cfg)) {
    std::cerr << *err << "\n";
    return 2;
  }
  auto minSync = durationFlag("min-sync-period",
                              flagOrAlias("min_sync_period", "iptables_min_sync_period", FLAGS_min_sync_period,
                                          FLAGS_iptables_min_sync_period));
  auto syncPeriod = durationFlag("sync-period", flagOrAlias("sync_period", "iptables_sync_period", FLAGS_sync_period,
                                                            FLAGS_iptables_sync_period));
  if (syncPeriod <= std::chrono::nanoseconds(0)) syncPeriod = std::chrono::seconds(30);

  // SIGTERM/SIGINT end the loop; the ruleset stays in place, so traffic keeps flowing. Blocked
  // before any thread exists (the API source starts several): a thread that does not block them
  // would take the signal's default action and kill the process mid-whatever.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  kpn::state::ClusterState state;
  std::unique_ptr<kpn::source::Source> sourcePtr = makeSource(cfg.nodeName, state);
  kpn::source::Source& source = *sourcePtr;
  source.start();
  kpn::render::Renderer renderer(cfg);
  renderer.setHostAddresses(kpn::net::readHostAddresses());
  if (FLAGS_dry_run) {
    if (!waitSynced(source, sigfd, std::chrono::seconds(60))) {
      std::cerr << "dry run: " << source.describe() << " did not list everything within 60 s\n";
      return 1;
    }
    return runDryRun(renderer, state);
  }

  kpn::nft::NftRunner runner;
  kpn::sync::Syncer syncer(renderer, runner);
  kpn::http::Loop httpLoop;  // before the servers on it: it must outlive them
  kpn::health::HealthCheckPorts healthPorts(httpLoop);
  // Upstream's health rule: unhealthy while a change has waited for its sync longer than two
  // sync periods (a commit failing over and over), healthy again once a sync lands.
  bool pending = false;  // a change waits for its sync since pendingSince
  auto pendingSince = Clock::now();
  LOG(INFO) << "kube-proxy-nft on node " << cfg.nodeName << ", source: " << source.describe();

  bool dirty = true;
  auto lastSync = Clock::time_point{};
  auto lastAddressRead = Clock::now();  // read once before the loop (above)
  auto nextForced = Clock::now();
  auto backoff = std::chrono::nanoseconds(0);
  auto nextWaitLog = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    auto now = Clock::now();
    auto due = dirty ? std::max(lastSync + minSync + backoff, now) : nextForced;
    due = std::min(due, nextForced);
    // Services the kernel refused are retried on their own backoff (pkg/sync/isolation.h).
    if (auto retry = syncer.nextRetry()) due = std::min(due, std::max(*retry, lastSync + minSync));
    // Until the source has seen everything, the table stays exactly as it is: syncing a
    // half-listed state would delete the rules of services not listed yet.
    if (now >= due && !source.hasSynced()) {
      if (now >= nextWaitLog) {
        LOG(INFO) << "waiting for " << source.describe() << " (" << source.pending() << ") before the first sync";
        nextWaitLog = now + std::chrono::seconds(10);
      }
      due = now + std::chrono::milliseconds(100);
    } else if (now >= due) {
      lastSync = now;
      // Addresses come and go without a manifest change: re-read them (getifaddrs and the route
      // tables, which can be long on a node with a route per pod) at most once a second.
      if (now - lastAddressRead >= std::chrono::seconds(1)) {
        renderer.setHostAddresses(kpn::net::readHostAddresses());
        lastAddressRead = now;
      }
      kpn::sync::SyncStats s = syncer.sync(state);
      if (s.ok) {
        logProgrammingLatency(source.takeTriggerTimes());
        dirty = false;
        backoff = std::chrono::nanoseconds(0);
        // Health-check node ports answer as of the ruleset just committed.
        healthPorts.update(state, cfg, syncer.lastChanges(), renderer.environment());
        pending = false;
      } else {
        // Retry soon, then less and less often, never slower than the sync period.
        backoff = std::min<std::chrono::nanoseconds>(backoff == std::chrono::nanoseconds(0) ? std::chrono::milliseconds(500) : backoff * 2, syncPeriod);
        dirty = true;
        LOG(WARNING) << "retrying in " << std::chrono::duration_cast<std::chrono::milliseconds>(backoff).count() << " ms";
      }
      nextForced = Clock::now() + syncPeriod;
      continue;
    }
    auto waitMs = std::chrono::duration_cast<std::chrono::milliseconds>(due - now).count() + 1;
    pollfd fds[2] = {{source.fd(), POLLIN, 0}, {sigfd, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(waitMs, 60000)));
    if (n > 0 && (fds[1].revents & POLLIN)) {
      LOG(INFO) << "signal received; exiting with the ruleset in place";
      return 0;
    }
    if (n > 0 && (fds[0].revents & POLLIN) && source.processEvents()) {
      dirty = true;
      if (!pending) pendingSince = Clock::now();
      pending = true;
    }
    healthPorts.setProxyHealthy(!(pending && Clock::now() - pendingSince > 2 * syncPeriod));
  }
}
