#include "cmd/kube-proxy-nft/state_source.h"

#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>

#include "pkg/kube/client_config.h"
#include "pkg/kube/cpprest_transport.h"
#include "pkg/source/api_source.h"
#include "pkg/source/manifest_dir.h"

namespace kpn::cmd {

std::string localHostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::unique_ptr<source::Source> makeSource(const config::Loaded& conf, const std::string& nodeName,
                                                state::ClusterState& state, kube::RequestHook onRequest) {
  const config::DaemonOptions& opt = conf.options;
  const std::string& kubeconfig = conf.config.clientConnection.kubeconfig;
  if (!opt.manifests.empty()) return std::make_unique<source::ManifestDir>(opt.manifests, nodeName, state);
  kube::ClientConfig cfg;
  cfg.qps = conf.config.clientConnection.qps;
  cfg.burst = conf.config.clientConnection.burst;
  std::optional<std::string> err;
  if (!kubeconfig.empty()) {
    err = kube::loadKubeconfig(kubeconfig, opt.kubeconfigContext, cfg);
  } else if (opt.master.empty()) {
    if (!std::getenv("KUBERNETES_SERVICE_HOST")) {
      std::cerr << "no cluster-state source: give --manifests=DIR, --kubeconfig=FILE or --master=URL, "
                   "or run in a pod (KUBERNETES_SERVICE_HOST)\n";
      std::exit(2);
    }
    err = kube::inClusterConfig([](const char* n) { return std::getenv(n); }, opt.serviceAccountDir, cfg);
  }
  if (!err && !opt.master.empty()) err = kube::normaliseServer(opt.master, cfg.server);
  if (err) {
    std::cerr << *err << "\n";
    std::exit(2);
  }
  return std::make_unique<source::ApiSource>(kube::makeCpprestTransport(cfg, {}, std::move(onRequest)),
                                                 nodeName, state);
}

bool waitSynced(source::Source& source, int sigfd, std::chrono::seconds limit) {
  using Clock = std::chrono::steady_clock;
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

}  // namespace kpn::cmd
