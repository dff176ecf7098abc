// kube-proxy-nft: makes Service traffic work on this node with one atomic nftables ruleset.
// Wiring only: flags/--config -> source -> store -> syncer; each piece lives in pkg/ or nft/.
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
#include <future>
#include <iostream>
#include <memory>
#include <optional>

#include "cmd/kube-proxy-nft/cleanup_command.h"
#include "cmd/kube-proxy-nft/diagnosis.h"
#include "cmd/kube-proxy-nft/flags.h"
#include "cmd/kube-proxy-nft/malloc_tunables_exec.h"
#include "cmd/kube-proxy-nft/nft_runner_options.h"
#include "cmd/kube-proxy-nft/state_source.h"
#include "cmd/kube-proxy-nft/status_command.h"
#include "cmd/kube-proxy-nft/trace_command.h"
#include "nft/diff.h"
#include "nft/kernel/nft_helper.h"
#include "nft/static_declarations.h"
#include "pkg/api/skip_report.h"
#include "pkg/config/file_watch.h"
#include "pkg/config/node_config.h"
#include "pkg/config/version.h"
#include "pkg/conntrack/cleanup_worker.h"
#include "pkg/conntrack/lc_follower.h"
#include "pkg/conntrack/netlink_table.h"
#include "pkg/health/health_check_ports.h"
#include "pkg/health/healthz_server.h"
#include "pkg/health/proxy_health.h"
#include "pkg/health/sync_follower.h"
#include "pkg/http/server.h"
#include "pkg/iptables/iptables_cleanup.h"
#include "pkg/kube/client_config.h"
#include "pkg/kube/cpprest_transport.h"
#include "pkg/localhost/proxy.h"
#include "pkg/localhost/sync_follower.h"
#include "pkg/logging/glog_setup.h"
#include "pkg/metrics/least_conn_metrics.h"
#include "pkg/metrics/localhost_nodeports.h"
#include "pkg/metrics/metrics_server.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/metrics/sync_follower.h"
#include "pkg/net/fd_limit.h"
#include "pkg/net/ip.h"
#include "pkg/node/prepare.h"
#include "pkg/render/layout.h"
#include "pkg/render/render.h"
#include "pkg/source/api_source.h"
#include "pkg/source/manifest_dir.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/loop.h"
#include "pkg/sync/planner.h"
#include "pkg/sync/programming_latency_log.h"
#include "pkg/sync/state_sync_target.h"
#include "pkg/sync/sync_log.h"
#include "pkg/sync/syncer.h"

namespace {


// The daemon's plan path against tables holding just the start-up declarations, printed first:
// everything is added.
int runDryRun(kpn::render::Renderer& renderer, const kpn::state::ClusterState& st) {
  kpn::sync::PlannedSync p = kpn::sync::renderAndPlan(renderer, st, {}, kpn::sync::PlanBase::declaredOnly());
  // On stderr, apart from the ruleset: what a cold start into empty tables spends before its commit.
  LOG(INFO) << "dry run: rendered in " << p.renderMs << " ms, planned " << p.plan.txn.size() << " operations in "
            << p.diffMs << " ms";
  std::cout << kpn::nft::staticDeclarationsText(p.desired()) << p.plan.txn.toText();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kpn::cmd::reexecWithMallocTunables(argv);
  kpn::logging::startLogging(argv[0]);
  // The same binary is the libnftables helper process (nft/kernel/nft_helper.h).
  if (auto rc = kpn::nft::runNftHelperIfAsked(argc, argv)) return *rc;
  if (auto rc = kpn::cmd::runTraceIfAsked(argc, argv)) return *rc;
  if (auto rc = kpn::cmd::runStatusIfAsked(argc, argv)) return *rc;
  // Big short-lived buffers (list bodies and their JSON trees, transactions) straight from mmap,
  // so they go back to the system when freed. glibc's default threshold rises to 32 MiB after
  // the first such buffer is freed, after which they land in the heap between long-lived
  // objects and keep its pages resident.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);

  const kpn::config::Loaded conf = kpn::cmd::loadConfigOrExit({argv + 1, argv + argc});
  if (conf.options.cleanup) return kpn::cmd::runCleanup();
  if (conf.options.initOnly) {  // upstream's --init-only: the privileged start-up steps, then exit
    kpn::nft::NftRunner runner(kpn::cmd::nftRunnerOptions());
    auto err = kpn::node::prepareNode(conf, runner);
    if (err) std::cerr << *err << "\n";
    return err ? 1 : 0;
  }

  kpn::services::NodeConfig cfg;
  cfg.nodeName = kpn::config::nodeName(conf.config, kpn::cmd::localHostname());
  std::vector<std::string> warnings;
  if (auto err = kpn::config::toNodeConfig(conf.config, cfg, &warnings)) {
    std::cerr << *err << "\n";
    return 2;
  }
  for (const auto& w : warnings) LOG(WARNING) << w;
  const std::chrono::nanoseconds minSync = conf.config.nftables.minSyncPeriod;
  const std::chrono::nanoseconds syncPeriod = conf.config.nftables.syncPeriod;

  // SIGTERM/SIGINT end the loop; the ruleset stays in place, so traffic keeps flowing. Blocked
  // before any thread exists (the API source starts several): a thread that does not block them
  // would take the signal's default action and kill the process mid-whatever.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  // As upstream: a written or renamed --config file ends the daemon (exit 1) to be restarted with it.
  kpn::config::ConfigFileWatch configWatch(conf.options.configFile, kpn::config::ConfigFileWatch::exitOnChange);

  kpn::metrics::ProxyMetrics metrics({kpn::config::version(), kpn::config::gitCommit()});
  kpn::api::setSkipSink([&metrics](const std::string& kind, const std::string& reason) { metrics.countSkipped(kind, reason); });
  kpn::state::ClusterState state;
  std::unique_ptr<kpn::source::Source> sourcePtr = kpn::cmd::makeSource(
      conf, cfg.nodeName, state, [&metrics](const char* method, const std::string& host, int code, double secs) {
        metrics.observeRestRequest(method, host, code, secs);
      });
  kpn::source::Source& source = *sourcePtr;
  kpn::render::Renderer renderer(cfg);
  renderer.setHostAddresses(kpn::net::readHostAddresses());
  kpn::nft::NftRunner runner(kpn::cmd::nftRunnerOptions());
  kpn::sync::Syncer syncer(renderer, runner);
  // Before the first sync: the kernel has what the ruleset needs, then upstream's node settings
  // and the families the kernel serves; on a thread of their own while the source reads (a
  // manifest folder reads in start()).
  std::future<std::optional<std::string>> prepared;
  if (!conf.options.dryRun)
    prepared = kpn::node::prepareNodeInBackground(conf, runner, [&syncer] { syncer.probeFamilies(); });
  source.start();
  if (conf.options.dryRun) {
    if (!kpn::cmd::waitSynced(source, sigfd, std::chrono::seconds(60))) {
      std::cerr << "dry run: " << source.describe() << " did not list everything within 60 s\n";
      return 1;
    }
    return runDryRun(renderer, state);
  }
  if (auto err = prepared.get()) {
    std::cerr << *err << "\n";
    return 1;
  }
  metrics.servedFamilies([&syncer] { return syncer.families(); });  // per-family series: served ones only
  kpn::sync::RealClock clock;
  kpn::sync::StateSyncTarget target(clock, state, renderer, syncer, kpn::net::readHostAddresses);
  kpn::sync::SyncLoop loop(clock, source, target, {minSync, syncPeriod});
  // `status`, `trace` and Kubernetes Events: what the daemon knows, for those who cannot read its log.
  kpn::cmd::Diagnosis diagnosis({conf, cfg.nodeName, source, state, syncer, renderer, metrics});
  diagnosis.observe(loop);
  if (conf.options.cleanupIptables) syncer.afterCommit(kpn::iptables::iptablesLeftoverCleaner(runner));
  kpn::net::FdLimit fds = kpn::net::raiseFdLimit();
  LOG(INFO) << "open files limit " << fds.soft << " (hard " << fds.hard << ")" << (fds.error.empty() ? "" : ": " + fds.error);
  // Before the servers on it: it must outlive them.
  kpn::http::Loop httpLoop(kpn::net::httpConnectionBudget(fds.soft));
  kpn::health::HealthCheckPorts healthPorts(httpLoop, diagnosis.healthCheckBindFailure());
  // Upstream's health rule: unhealthy while a change has waited for its sync longer than two
  // sync periods (a commit failing over and over), healthy again once a sync lands; for the
  // families the syncer programs (known from its first sync).
  kpn::health::ProxyHealth proxyHealth(clock, 2 * syncPeriod,
                                       [&syncer] { return kpn::health::familyNames(syncer.families()); });
  kpn::health::SyncFollower healthFollower(state, cfg, renderer.environment(), healthPorts, proxyHealth);
  kpn::metrics::StateMetricsFollower metricsFollower(state, cfg, metrics);
  kpn::sync::ProgrammingLatencyLog latencyLog;
  kpn::sync::SyncLog syncLog(state);
  // After each sync, stale UDP conntrack entries go, on the worker's own thread.
  kpn::conntrack::CleanupWorker conntrackWorker(kpn::conntrack::openKernelFlowTable,
                                                [&metrics](const char* family, const kpn::conntrack::FamilyResult& r) {
                                                  metrics.observeConntrackReconcile(family, r.seconds, r.deleted);
                                                });
  kpn::conntrack::CleanupFollower conntrackFollower(state, cfg, conntrackWorker);
  // Least connection: counts from conntrack on their own thread, choices synced as they come.
  const bool endpointGauges = conf.options.endpointConnectionMetrics;
  kpn::conntrack::LeastConnTracker lcTracker({std::chrono::seconds(30), endpointGauges});
  kpn::metrics::LeastConnMetrics lcMetrics(metrics.registry(), endpointGauges);
  kpn::conntrack::LeastConnFollower lcFollower(
      renderer, lcTracker, [&lcMetrics](size_t n, double secs) { lcMetrics.landed(n, secs); },
      endpointGauges ? kpn::conntrack::LeastConnFollower::Counts(
                           [&lcMetrics](const auto& rows) { lcMetrics.setEndpointConnections(rows); })
                     : nullptr);
  loop.setChoices(&lcFollower);
  for (kpn::sync::SyncObserver* o : std::initializer_list<kpn::sync::SyncObserver*>{
           &proxyHealth, &healthFollower, &metrics, &metricsFollower, &latencyLog, &syncLog, &conntrackFollower,
           &lcFollower})
    loop.addObserver(o);
  // NodePorts on loopback (a loopback entry in --nodeport-addresses): TCP listeners, after each sync.
  std::unique_ptr<kpn::localhost::Proxy> localhostProxy;
  std::unique_ptr<kpn::metrics::LocalhostNodePortMetrics> localhostMetrics;
  std::unique_ptr<kpn::localhost::SyncFollower> localhostFollower;
  if (cfg.localhostNodePortsV4 || cfg.localhostNodePortsV6) {
    localhostProxy = std::make_unique<kpn::localhost::Proxy>();
    localhostMetrics = std::make_unique<kpn::metrics::LocalhostNodePortMetrics>(metrics, kpn::render::kTableName);
    localhostFollower = std::make_unique<kpn::localhost::SyncFollower>(
        state, cfg, renderer, [&syncer] { return syncer.families(); }, *localhostProxy, *localhostMetrics);
    loop.addObserver(localhostFollower.get());
  }
  kpn::health::HealthzServer healthzServer;
  kpn::metrics::MetricsServer metricsServer;
  auto serverError = healthzServer.start(httpLoop, conf.config.healthzBindAddress, conf.config.bindAddressHardFail,
                                         proxyHealth, clock, &metrics, diagnosis.serverBindFailure());
  if (!serverError)
    serverError = metricsServer.start(httpLoop, conf.config.metricsBindAddress, conf.config.bindAddressHardFail,
                                      metrics, diagnosis.serverBindFailure());
  if (serverError) {
    LOG(ERROR) << *serverError;
    diagnosis.flushEvents(std::chrono::seconds(5));  // upstream's Warning on the Node, then exit
    return 1;
  }
  diagnosis.record(kpn::events::startingEvent(cfg.nodeName));  // upstream's "birth cry"
  LOG(INFO) << "kube-proxy-nft " << kpn::config::versionLine() << " on node " << cfg.nodeName << ", source: " << source.describe();
  auto monitor = kpn::nft::TableMonitor::forTablesOf(renderer.skeleton());  // repairs outside damage
  if (monitor) {
    runner.onOwnCommit([m = monitor.get()](uint32_t generation) { m->noteOwnCommit(generation); });
    runner.onBigCommit([m = monitor.get()](bool starting) { starting ? m->deafen() : m->listen(); });
  }
  kpn::sync::runSyncLoop(loop, source, sigfd, monitor.get(), diagnosis.wakeFd());
  LOG(INFO) << "signal received; exiting with the ruleset in place";
  return 0;
}
