#include "cmd/kube-proxy-nft/flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "pkg/config/encode.h"
#include "pkg/config/warnings.h"

// Every flag is a string (or a bool, so that `--masquerade-all` alone works) and is parsed by
// pkg/config, which knows which were given; the defaults shown in --help are ProxyConfig's.
// --v and --vmodule are glog's own; --version is gflags' (SetVersionString in main).
DEFINE_string(config, "", "Path to a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1, YAML or JSON). Flags that map to a field are then ignored, except --hostname-override and the logging flags (upstream's rule)");
DEFINE_string(write_config_to, "", "Write the effective configuration as KubeProxyConfiguration YAML to this file and exit");
DEFINE_string(manifests, "", "Folder of Service/EndpointSlice/Node manifests (YAML or JSON) to use as the cluster state");
DEFINE_string(kubeconfig, "", "Path to a kubeconfig file: get the cluster state from that API server (clientConnection.kubeconfig)");
DEFINE_string(master, "", "Address of the Kubernetes API server (overrides the kubeconfig's server; also beside --config)");
DEFINE_string(kubeconfig_context, "", "kubeconfig context to use instead of its current-context");
DEFINE_string(kube_api_qps, "5", "Requests per second to the API server (clientConnection.qps)");
DEFINE_string(kube_api_burst, "10", "Burst of requests to the API server above --kube-api-qps (clientConnection.burst)");
DEFINE_string(kube_api_content_type, "application/vnd.kubernetes.protobuf", "Accepted and ignored: the daemon speaks JSON (clientConnection.contentType)");
DEFINE_string(service_account_dir, "/var/run/secrets/kubernetes.io/serviceaccount",
              "In a pod: where the service-account token and ca.crt are mounted");
DEFINE_string(hostname_override, "", "This node's name; endpoints with this nodeName are local (default: the hostname). Wins over the config file's hostnameOverride");
DEFINE_string(bind_address, "0.0.0.0", "Upstream's primary-node-IP hint (bindAddress); accepted, not honoured: the Node object gives it");
DEFINE_string(healthz_bind_address, "0.0.0.0:10256", "IP:port of the /healthz and /livez server (healthzBindAddress); empty disables");
DEFINE_string(metrics_bind_address, "127.0.0.1:10249", "IP:port of the /metrics server (metricsBindAddress); empty or port 0 disables");
DEFINE_bool(bind_address_hard_fail, false, "Exit when a server's port cannot be bound (bindAddressHardFail); else log and retry");
DEFINE_string(healthz_port, "10256", "Deprecated (upstream too): 0 disables the health server; else the port of a --healthz-bind-address without one");
DEFINE_string(metrics_port, "10249", "Deprecated (upstream too): 0 disables the metrics server; else the port of a --metrics-bind-address without one");
DEFINE_bool(profiling, false, "Accepted, not honoured (enableProfiling)");
DEFINE_string(show_hidden_metrics_for_version, "", "Accepted, not honoured (showHiddenMetricsForVersion)");
DEFINE_string(feature_gates, "", "NAME=true|false,...: logged and ignored (featureGates; no gate is implemented)");
DEFINE_string(proxy_mode, "", "nftables or empty; iptables and ipvs run in nftables mode with a warning (mode)");
DEFINE_string(cluster_cidr, "", "Pod CIDRs (at most one per family, comma separated); traffic from outside them to a ClusterIP is masqueraded (clusterCIDR)");
DEFINE_bool(masquerade_all, false, "Masquerade all traffic sent to ClusterIPs (nftables.masqueradeAll)");
DEFINE_string(iptables_masquerade_bit, "14", "The fwmark bit that marks packets to masquerade, 0..31 (nftables.masqueradeBit)");
DEFINE_bool(iptables_localhost_nodeports, true, "iptables mode only; nftables mode never serves NodePorts on 127.0.0.1 (iptables.localhostNodePorts)");
DEFINE_string(min_sync_period, "1s", "Minimum time between syncs (Go duration); 0 syncs on every change (nftables.minSyncPeriod)");
DEFINE_string(sync_period, "30s", "Maximum time between syncs, and the retry ceiling after a failure (Go duration; nftables.syncPeriod)");
DEFINE_string(iptables_min_sync_period, "1s", "Upstream's name for --min-sync-period (ignored in ipvs mode, as upstream)");
DEFINE_string(iptables_sync_period, "30s", "Upstream's name for --sync-period (ignored in ipvs mode, as upstream)");
DEFINE_string(ipvs_min_sync_period, "0s", "In ipvs mode: --min-sync-period (ipvs.minSyncPeriod)");
DEFINE_string(ipvs_sync_period, "30s", "In ipvs mode: --sync-period (ipvs.syncPeriod)");
DEFINE_string(ipvs_scheduler, "", "As --scheduler (ipvs.scheduler): rr, wrr, sh, mh map to ours (docs/schedulers.md)");
DEFINE_string(scheduler, "", "Default scheduler of services without the kube-proxy-nft.io/scheduler annotation: "
              "random (default), round-robin, source-hash, or an IPVS name (ipvs.scheduler)");
DEFINE_string(ipvs_exclude_cidrs, "", "Accepted (ipvs.excludeCIDRs): we never touch IPVS");
DEFINE_bool(ipvs_strict_arp, false, "Accepted, not honoured (ipvs.strictARP)");
DEFINE_string(ipvs_tcp_timeout, "0s", "Accepted, not honoured (ipvs.tcpTimeout)");
DEFINE_string(ipvs_tcpfin_timeout, "0s", "Accepted, not honoured (ipvs.tcpFinTimeout)");
DEFINE_string(ipvs_udp_timeout, "0s", "Accepted, not honoured (ipvs.udpTimeout)");
DEFINE_string(nodeport_addresses, "primary",
              "Addresses NodePorts answer on: \"primary\" (the Node's primary InternalIP per family; without a Node "
              "object, the addresses of the default route's interface) or comma-separated CIDRs of local addresses "
              "(0.0.0.0/0, ::/0: all); never loopback (nodePortAddresses)");
DEFINE_string(detect_local_mode, "ClusterCIDR",
              "How traffic from local pods is recognised: ClusterCIDR (--cluster-cidr), NodeCIDR (the Node's "
              "podCIDRs), BridgeInterface (--pod-bridge-interface), InterfaceNamePrefix (--pod-interface-name-prefix)");
DEFINE_string(pod_bridge_interface, "", "With --detect-local-mode=BridgeInterface: the bridge the pods are attached to");
DEFINE_string(pod_interface_name_prefix, "",
              "With --detect-local-mode=InterfaceNamePrefix: the name prefix of the pods' host-side interfaces");
DEFINE_string(oom_score_adj, "-999", "oom_score_adj of the process, -1000..1000 (oomScoreAdj)");
DEFINE_string(conntrack_max_per_core, "32768", "nf_conntrack_max = max(this x CPUs, --conntrack-min); 0 leaves it as is (conntrack.maxPerCore)");
DEFINE_string(conntrack_min, "131072", "Floor of nf_conntrack_max (conntrack.min)");
DEFINE_string(conntrack_tcp_timeout_established, "24h0m0s", "nf_conntrack_tcp_timeout_established; 0 leaves it as is");
DEFINE_string(conntrack_tcp_timeout_close_wait, "1h0m0s", "nf_conntrack_tcp_timeout_close_wait; 0 leaves it as is");
DEFINE_bool(conntrack_tcp_be_liberal, false, "Set nf_conntrack_tcp_be_liberal to 1 (out-of-window packets are not INVALID)");
DEFINE_string(conntrack_udp_timeout, "0s", "nf_conntrack_udp_timeout (unreplied UDP); 0 leaves it as is");
DEFINE_string(conntrack_udp_timeout_stream, "0s", "nf_conntrack_udp_timeout_stream (assured UDP); 0 leaves it as is");
DEFINE_string(config_sync_period, "15m0s", "Accepted (configSyncPeriod): the watches need no periodic resync");
DEFINE_bool(dry_run, false, "Print the complete desired ruleset for both families as nft text and exit");
DEFINE_bool(cleanup, false,
            "Delete the ip and ip6 kube-proxy tables and upstream kube-proxy's iptables-mode chains, and exit");
DEFINE_bool(cleanup_iptables, true,
            "Once our rules are committed, remove upstream kube-proxy's iptables-mode KUBE-* chains and the jumps to "
            "them from the iptables-nft tables (docs/migration.md)");
DEFINE_bool(endpoint_connection_metrics, false,
            "Export kubeproxy_nftables_endpoint_connections: this node's active and inactive connections to each "
            "endpoint of a least-connection service port (one series per endpoint and state)");
DEFINE_bool(init_only, false, "Run the privileged start-up steps (kernel probe, oomScoreAdj, conntrack sysctls) and exit");
DEFINE_string(probe_fake_requirement, "", "Test only: names a kernel requirement that no kernel meets, to prove the start-up probe's error");

namespace kpn::cmd {

namespace {

// The flags given on the command line, by their dashed names. A name pkg/config knows and
// gflags does not is a programming error: the two lists must match.
config::GivenFlags givenFlags() {
  config::GivenFlags given;
  for (const std::string& dashed : config::knownFlagNames()) {
    std::string name = dashed;
    for (char& c : name)
      if (c == '-') c = '_';
    gflags::CommandLineFlagInfo info;
    CHECK(gflags::GetCommandLineFlagInfo(name.c_str(), &info)) << "flag --" << dashed << " is not defined";
    if (!info.is_default) given[dashed] = info.current_value;
  }
  return given;
}

bool readWholeFile(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = std::string("cannot read: ") + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = std::string("cannot read: ") + std::strerror(errno);
    return false;
  }
  *text = ss.str();
  return true;
}

void applyLogging(const config::Logging& l) {
  FLAGS_v = l.verbosity;
  for (const config::VModule& m : l.vmodule) google::SetVLOGLevel(m.filePattern.c_str(), m.verbosity);
}

}  // namespace

config::Loaded loadConfigOrExit() {
  config::Loaded loaded;
  if (auto err = config::loadCommandLine(givenFlags(), readWholeFile, loaded)) {
    std::cerr << *err << "\n";
    std::exit(2);
  }
  applyLogging(loaded.config.logging);
  if (!loaded.options.writeConfigTo.empty()) {
    std::ofstream out(loaded.options.writeConfigTo, std::ios::trunc);
    out << config::encodeProxyConfig(loaded.config);
    out.close();
    if (!out) {
      std::cerr << "--write-config-to=" << loaded.options.writeConfigTo << ": cannot write: " << std::strerror(errno) << "\n";
      std::exit(1);
    }
    LOG(INFO) << "wrote the configuration to " << loaded.options.writeConfigTo;
    std::exit(0);
  }
  if (!loaded.ignoredFlags.empty()) {
    std::string names;
    for (const std::string& f : loaded.ignoredFlags) names += (names.empty() ? "" : ", ") + f;
    LOG(WARNING) << "ignored because --config is given (upstream's rule; set the fields in the file): " << names;
  }
  for (const std::string& w : loaded.warnings) LOG(WARNING) << w;
  config::StartupNotes notes = config::startupNotes(loaded.config);
  for (const std::string& w : notes.warnings) LOG(WARNING) << w;
  for (const std::string& i : notes.info) LOG(INFO) << i;
  return loaded;
}

}  // namespace kpn::cmd
