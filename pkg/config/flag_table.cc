#include "pkg/config/flag_table.h"

#include "pkg/config/fields.h"
#include "pkg/config/flag_values.h"

namespace kpn::config {

namespace {

using S = const std::string&;
using K = FlagKind;
using Sec = FlagSection;

// The flag of a KubeProxyConfiguration field: what it sets comes from the field table (fields.h),
// bound by withFieldFlags below.
const std::nullptr_t kSetsItsField = nullptr;

std::vector<FlagSpec> makeTable() {
  return {
      // Where the cluster state comes from.
      {"manifests", K::Daemon, Sec::Source, "string", "",
       "Folder of Service/EndpointSlice/Node manifests (YAML or JSON) to use as the cluster state; re-read on change",
       [](Loaded& l, S v) { l.options.manifests = v; }},
      {"kubeconfig", K::Field, Sec::Source, "string", "",
       "Path to a kubeconfig file: get the cluster state from that API server (clientConnection.kubeconfig)", kSetsItsField},
      {"kubeconfig-context", K::Daemon, Sec::Source, "string", "", "kubeconfig context to use instead of its current-context",
       [](Loaded& l, S v) { l.options.kubeconfigContext = v; }},
      {"master", K::Daemon, Sec::Source, "string", "",
       "Address of the Kubernetes API server (overrides the kubeconfig's server; also beside --config)",
       [](Loaded& l, S v) { l.options.master = v; }},
      {"service-account-dir", K::Daemon, Sec::Source, "string", "/var/run/secrets/kubernetes.io/serviceaccount",
       "In a pod: where the service-account token and ca.crt are mounted",
       [](Loaded& l, S v) { l.options.serviceAccountDir = v; }},
      {"kube-api-qps", K::Field, Sec::Source, "float32", "5", "Requests per second to the API server (clientConnection.qps)", kSetsItsField},
      {"kube-api-burst", K::Field, Sec::Source, "int32", "10",
       "Burst of requests to the API server above --kube-api-qps (clientConnection.burst)", kSetsItsField},
      {"kube-api-content-type", K::Field, Sec::Source, "string", "application/vnd.kubernetes.protobuf",
       "Accepted and ignored: the daemon speaks JSON (clientConnection.contentType)", kSetsItsField},
      {"config-sync-period", K::Field, Sec::Source, "duration", "15m0s",
       "Accepted (configSyncPeriod): the watches need no periodic resync", kSetsItsField},

      // The configuration file and the node's identity.
      {"config", K::Daemon, Sec::Config, "string", "",
       "Path to a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1, YAML or JSON). Flags that map to a field "
       "are then ignored, except --hostname-override and the logging flags (upstream's rule)",
       [](Loaded& l, S v) { l.options.configFile = v; }},
      {"write-config-to", K::Daemon, Sec::Config, "string", "",
       "Write the effective configuration as KubeProxyConfiguration YAML to this file and exit",
       [](Loaded& l, S v) { l.options.writeConfigTo = v; }},
      {"hostname-override", K::Daemon, Sec::Config, "string", "",
       "This node's name; endpoints with this nodeName are local (default: the hostname). Wins over the config "
       "file's hostnameOverride",
       nullptr},  // applyHostnameOverride
      {"feature-gates", K::Field, Sec::Config, "NAME=bool,...", "",
       "Logged and ignored (featureGates; no gate is implemented)", kSetsItsField},

      // What the rules do.
      {"proxy-mode", K::Field, Sec::Rules, "string", "",
       "nftables or empty; iptables and ipvs run in nftables mode with a warning (mode)", kSetsItsField},
      {"cluster-cidr", K::Field, Sec::Rules, "CIDR[,CIDR]", "",
       "Pod CIDRs (at most one per family); traffic from outside them to a ClusterIP is masqueraded (clusterCIDR)", kSetsItsField},
      {"masquerade-all", K::Field, Sec::Rules, "bool", "false",
       "Masquerade all traffic sent to ClusterIPs (nftables.masqueradeAll)", kSetsItsField},
      {"iptables-masquerade-bit", K::Field, Sec::Rules, "int32", "14",
       "The fwmark bit that marks packets to masquerade, 0..31 (nftables.masqueradeBit)", kSetsItsField},
      {"nodeport-addresses", K::Field, Sec::Rules, "strings", "",
       "Addresses NodePorts answer on: \"primary\" (the default: the Node's primary InternalIP per family; without a "
       "Node object, the addresses of the default route's interface), CIDRs of local addresses, \"all\" (0.0.0.0/0, "
       "::/0), \"localhost\" (127.0.0.0/8, ::1/128: TCP NodePorts on 127.0.0.1 and ::1 through a listener, UDP and "
       "SCTP refused there), combined at will. An entry that is none of these is an error (nodePortAddresses)", kSetsItsField},
      {"detect-local-mode", K::Field, Sec::Rules, "string", "",
       "How traffic from local pods is recognised: ClusterCIDR (the default; --cluster-cidr), NodeCIDR (the Node's podCIDRs), "
       "BridgeInterface (--pod-bridge-interface), InterfaceNamePrefix (--pod-interface-name-prefix)", kSetsItsField},
      {"pod-bridge-interface", K::Field, Sec::Rules, "string", "",
       "With --detect-local-mode=BridgeInterface: the bridge the pods are attached to", kSetsItsField},
      {"pod-interface-name-prefix", K::Field, Sec::Rules, "string", "",
       "With --detect-local-mode=InterfaceNamePrefix: the name prefix of the pods' host-side interfaces", kSetsItsField},
      {"scheduler", K::Field, Sec::Rules, "string", "",
       "Scheduler of services without the kube-proxy-nft.io/scheduler annotation: random (the default), round-robin, "
       "source-hash, least-connection, or an IPVS name (rr, wrr: round-robin; sh, mh: source-hash; lc, wlc: "
       "least-connection) (ipvs.scheduler; docs/schedulers.md)", kSetsItsField},
      {"ipvs-scheduler", K::Field, Sec::Rules, "string", "", "As --scheduler (ipvs.scheduler)", kSetsItsField},
      // Sync periods: applySyncPeriods decides which of these apply in which mode.
      {"min-sync-period", K::Field, Sec::Rules, "duration", "1s",
       "Minimum time between syncs; 0 syncs on every change (nftables.minSyncPeriod)", nullptr},
      {"sync-period", K::Field, Sec::Rules, "duration", "30s",
       "Maximum time between syncs, and the retry ceiling after a failure (nftables.syncPeriod)", nullptr},
      {"iptables-min-sync-period", K::Field, Sec::Rules, "duration", "1s",
       "Upstream's name for --min-sync-period (ignored in ipvs mode, as upstream)", nullptr},
      {"iptables-sync-period", K::Field, Sec::Rules, "duration", "30s",
       "Upstream's name for --sync-period (ignored in ipvs mode, as upstream)", nullptr},
      {"ipvs-min-sync-period", K::Field, Sec::Rules, "duration", "0s", "In ipvs mode: --min-sync-period (ipvs.minSyncPeriod)",
       nullptr},
      {"ipvs-sync-period", K::Field, Sec::Rules, "duration", "30s", "In ipvs mode: --sync-period (ipvs.syncPeriod)", nullptr},
      {"cleanup-iptables", K::Daemon, Sec::Rules, "bool", "true",
       "Once our rules are committed, remove upstream kube-proxy's iptables-mode KUBE-* chains and the jumps to them "
       "from the iptables-nft tables (docs/migration.md)",
       [](Loaded& l, S v) { l.options.cleanupIptables = flagBool("cleanup-iptables", v); }},
      {"iptables-localhost-nodeports", K::Field, Sec::Rules, "bool", "true",
       "iptables mode only; here NodePorts answer on 127.0.0.1 only with a loopback entry in --nodeport-addresses "
       "(iptables.localhostNodePorts)", kSetsItsField},

      // The node's kernel settings, at start-up.
      {"oom-score-adj", K::Field, Sec::NodeSettings, "int32", "-999", "oom_score_adj of the process, -1000..1000 (oomScoreAdj)", kSetsItsField},
      {"conntrack-max-per-core", K::Field, Sec::NodeSettings, "int32", "32768",
       "nf_conntrack_max = max(this x CPUs, --conntrack-min); 0 leaves it as is (conntrack.maxPerCore)", kSetsItsField},
      {"conntrack-min", K::Field, Sec::NodeSettings, "int32", "131072", "Floor of nf_conntrack_max (conntrack.min)", kSetsItsField},
      {"conntrack-tcp-timeout-established", K::Field, Sec::NodeSettings, "duration", "24h0m0s",
       "nf_conntrack_tcp_timeout_established; 0 leaves it as is", kSetsItsField},
      {"conntrack-tcp-timeout-close-wait", K::Field, Sec::NodeSettings, "duration", "1h0m0s",
       "nf_conntrack_tcp_timeout_close_wait; 0 leaves it as is", kSetsItsField},
      {"conntrack-tcp-be-liberal", K::Field, Sec::NodeSettings, "bool", "false",
       "Set nf_conntrack_tcp_be_liberal to 1 (out-of-window packets are not INVALID)", kSetsItsField},
      {"conntrack-udp-timeout", K::Field, Sec::NodeSettings, "duration", "0s",
       "nf_conntrack_udp_timeout (unreplied UDP); 0 leaves it as is", kSetsItsField},
      {"conntrack-udp-timeout-stream", K::Field, Sec::NodeSettings, "duration", "0s",
       "nf_conntrack_udp_timeout_stream (assured UDP); 0 leaves it as is", kSetsItsField},

      // The health and metrics servers.
      {"healthz-bind-address", K::Field, Sec::Servers, "IP:port", "0.0.0.0:10256",
       "IP:port of the /healthz and /livez server (healthzBindAddress); empty disables", kSetsItsField},
      {"metrics-bind-address", K::Field, Sec::Servers, "IP:port", "127.0.0.1:10249",
       "IP:port of the /metrics server (metricsBindAddress); empty or port 0 disables", kSetsItsField},
      {"endpoint-connection-metrics", K::Daemon, Sec::Servers, "bool", "false",
       "Export kubeproxy_nftables_endpoint_connections: this node's active and inactive connections to each endpoint "
       "of a least-connection service port (one series per endpoint and state: off by default for the cardinality)",
       [](Loaded& l, S v) { l.options.endpointConnectionMetrics = flagBool("endpoint-connection-metrics", v); }},
      {"bind-address-hard-fail", K::Field, Sec::Servers, "bool", "false",
       "Exit when a server's port cannot be bound (bindAddressHardFail); else log and retry", kSetsItsField},
      {"healthz-port", K::Field, Sec::Servers, "int32", "10256",
       "Deprecated (upstream too): 0 disables the health server; else the port of a --healthz-bind-address without one",
       nullptr},  // applyDeprecatedPorts
      {"metrics-port", K::Field, Sec::Servers, "int32", "10249",
       "Deprecated (upstream too): 0 disables the metrics server; else the port of a --metrics-bind-address without one",
       nullptr},
      {"bind-address", K::Field, Sec::Servers, "IP", "0.0.0.0",
       "Upstream's primary-node-IP hint (bindAddress); accepted, not honoured: the Node object gives it", kSetsItsField},
      {"profiling", K::Field, Sec::Servers, "bool", "false", "Accepted, not honoured (enableProfiling)", kSetsItsField},
      {"show-hidden-metrics-for-version", K::Field, Sec::Servers, "string", "",
       "Accepted, not honoured (showHiddenMetricsForVersion)", kSetsItsField},

      {"status-socket", K::Daemon, Sec::Servers, "@NAME|PATH", "@kube-proxy-nft/status",
       "Where the daemon answers `kube-proxy-nft status` and `trace`: @NAME (abstract, this network namespace) or a "
       "path; only root (or the daemon's user) may ask. Empty: no status socket",
       [](Loaded& l, S v) { l.options.statusSocket = v; }},

      // Run once and exit.
      {"dry-run", K::Daemon, Sec::RunOnce, "bool", "false",
       "Print the complete desired ruleset for both families as nft text and exit",
       [](Loaded& l, S v) { l.options.dryRun = flagBool("dry-run", v); }},
      {"cleanup", K::Daemon, Sec::RunOnce, "bool", "false",
       "Delete the ip and ip6 kube-proxy tables and upstream kube-proxy's iptables-mode chains, and exit",
       [](Loaded& l, S v) { l.options.cleanup = flagBool("cleanup", v); }},
      {"init-only", K::Daemon, Sec::RunOnce, "bool", "false",
       "Run the privileged start-up steps (kernel probe, oomScoreAdj, conntrack sysctls) and exit",
       [](Loaded& l, S v) { l.options.initOnly = flagBool("init-only", v); }},
      {"version", K::Command, Sec::RunOnce, "version", "false",
       "--version, --version=raw: print the version and exit; --version=vX.Y.Z: report that version (start-up line, "
       "metrics) and run",
       nullptr},
      {"help", K::Command, Sec::RunOnce, "bool", "false", "This text", nullptr},

      // Logging (KubeProxyConfiguration `logging:`; a flag given wins over the file).
      {"logging-format", K::Logging, Sec::Logging, "string", "text",
       "text: klog's lines (I1205 04:02:52.754104   13305 loop.cc:92] message); json: klog's JSON, one object per line "
       "({\"ts\":<ms since the epoch>,\"caller\":\"sync/loop.cc:92\",\"msg\":...,\"v\":0}) (logging.format)", kSetsItsField},
      {"v", K::Logging, Sec::Logging, "int32", "0",
       "Log verbosity: 1 adds each list's size, 2 one line per sync, 4 a refused transaction (logging.verbosity)", kSetsItsField},
      {"vmodule", K::Logging, Sec::Logging, "PATTERN=N,...", "",
       "Per-file verbosity, PATTERN a file name without extension (loop=3, sync*=2); text format only (logging.vmodule)", kSetsItsField},
      {"log-flush-frequency", K::Logging, Sec::Logging, "duration", "5s",
       "How often buffered --log-dir files are flushed; stderr, stdout and --log-file are written line by line "
       "(logging.flushFrequency)", kSetsItsField},
      {"log-json-split-stream", K::Logging, Sec::Logging, "bool", "false",
       "JSON format: errors to stderr, everything else to stdout (logging.options.json.splitStream)", kSetsItsField},
      {"log-json-info-buffer-size", K::Logging, Sec::Logging, "quantity", "0",
       "Accepted (a quantity, as upstream); info lines are written unbuffered (logging.options.json.infoBufferSize)", kSetsItsField},
      {"log-text-split-stream", K::Logging, Sec::Logging, "bool", "false",
       "Text format: errors to stderr, everything else to stdout (logging.options.text.splitStream)", kSetsItsField},
      {"log-text-info-buffer-size", K::Logging, Sec::Logging, "quantity", "0",
       "Accepted (a quantity, as upstream); info lines are written unbuffered (logging.options.text.infoBufferSize)", kSetsItsField},

      // klog's own flags: upstream before 1.26. Text format only.
      {"logtostderr", K::Klog, Sec::Klog, "bool", "true", "Log to stderr; false: to --log-file, else to --log-dir files",
       [](Loaded& l, S v) { l.options.klog.logToStderr = flagBool("logtostderr", v); }},
      {"alsologtostderr", K::Klog, Sec::Klog, "bool", "false", "With --logtostderr=false: to stderr as well",
       [](Loaded& l, S v) { l.options.klog.alsoLogToStderr = flagBool("alsologtostderr", v); }},
      {"stderrthreshold", K::Klog, Sec::Klog, "severity", "ERROR",
       "With --logtostderr=false: lines at or above this severity (INFO, WARNING, ERROR, FATAL) go to stderr as well",
       [](Loaded& l, S v) { l.options.klog.stderrThreshold = flagSeverity("stderrthreshold", v); }},
      {"log-file", K::Klog, Sec::Klog, "string", "",
       "With --logtostderr=false: append every line to this file (no effect otherwise, as klog)",
       [](Loaded& l, S v) { l.options.klog.logFile = v; }},
      {"log-dir", K::Klog, Sec::Klog, "string", "",
       "With --logtostderr=false and no --log-file: one file per severity in this directory, named as klog names "
       "them (default: the temporary directory)",
       [](Loaded& l, S v) { l.options.klog.logDir = v; }},
      {"log-file-max-size", K::Klog, Sec::Klog, "uint", "1800",
       "MB a log file may grow to: --log-file starts over (as klog), --log-dir moves to a new file; 0: no limit",
       [](Loaded& l, S v) { l.options.klog.logFileMaxSizeMB = flagUint32("log-file-max-size", v); }},
      {"skip-headers", K::Klog, Sec::Klog, "bool", "false", "Lines without the I1205 04:02:52.754104 ... loop.cc:92] header",
       [](Loaded& l, S v) { l.options.klog.skipHeaders = flagBool("skip-headers", v); }},
      {"add-dir-header", K::Klog, Sec::Klog, "bool", "false", "The header names the file with its directory (sync/loop.cc:92)",
       [](Loaded& l, S v) { l.options.klog.addDirHeader = flagBool("add-dir-header", v); }},
      {"log-backtrace-at", K::Klog, Sec::Klog, "FILE:LINE", "", "A stack trace when that line logs",
       [](Loaded& l, S v) { l.options.klog.logBacktraceAt = v; }},
      {"one-output", K::Klog, Sec::Klog, "bool", "false",
       "Accepted, not honoured: a --log-dir file holds its severity and the ones above",
       [](Loaded& l, S v) { l.options.klog.oneOutput = flagBool("one-output", v); }},
      {"skip-log-headers", K::Klog, Sec::Klog, "bool", "false",
       "Accepted, not honoured: --log-dir files start with a few header lines",
       [](Loaded& l, S v) { l.options.klog.skipLogHeaders = flagBool("skip-log-headers", v); }},

      // Accepted so that upstream's command lines run; nothing here reads them.
      {"ipvs-exclude-cidrs", K::Field, Sec::Ignored, "strings", "", "Accepted (ipvs.excludeCIDRs): we never touch IPVS", kSetsItsField},
      {"ipvs-strict-arp", K::Field, Sec::Ignored, "bool", "false", "Accepted, not honoured (ipvs.strictARP)", kSetsItsField},
      {"ipvs-tcp-timeout", K::Field, Sec::Ignored, "duration", "0s", "Accepted, not honoured (ipvs.tcpTimeout)", kSetsItsField},
      {"ipvs-tcpfin-timeout", K::Field, Sec::Ignored, "duration", "0s", "Accepted, not honoured (ipvs.tcpFinTimeout)", kSetsItsField},
      {"ipvs-udp-timeout", K::Field, Sec::Ignored, "duration", "0s", "Accepted, not honoured (ipvs.udpTimeout)", kSetsItsField},
      {"boot-id-file", K::Daemon, Sec::Ignored, "string", "/proc/sys/kernel/random/boot_id",
       "cadvisor's, on upstream's command line: accepted, nothing reads it", [](Loaded&, S) {}},
      {"machine-id-file", K::Daemon, Sec::Ignored, "string", "/etc/machine-id,/var/lib/dbus/machine-id",
       "cadvisor's, on upstream's command line: accepted, nothing reads it", [](Loaded&, S) {}},

      {"probe-fake-requirement", K::Daemon, Sec::Hidden, "string", "",
       "Test only: names a kernel requirement that no kernel meets, to prove the start-up probe's error",
       [](Loaded& l, S v) { l.options.probeFakeRequirements = splitComma(v); }},
  };
}

// A flag's text read as its field's kind and stored in the field; the list kinds add to it.
void applyToField(const ConfigField& field, const std::string& flag, S v, ProxyConfig& c) {
  auto member = [&](auto type) -> auto& { return std::get<Member<decltype(type)>>(field.member)(c); };
  auto append = [](auto& to, const auto& items) { to.insert(to.end(), items.begin(), items.end()); };
  switch (field.kind) {
    case FieldKind::Text: member(std::string()) = v; return;
    case FieldKind::Quantity: member(std::string()) = flagQuantity(flag, v); return;
    case FieldKind::Bool: member(bool()) = flagBool(flag, v); return;
    case FieldKind::Int32: member(int32_t()) = flagInt32(flag, v); return;
    case FieldKind::Float32: member(float()) = flagFloat(flag, v); return;
    case FieldKind::Duration:
    case FieldKind::DurationOrNanos: member(Duration()) = flagDuration(flag, v); return;
    case FieldKind::TextList: return append(member(std::vector<std::string>()), splitComma(v));
    case FieldKind::AddressList: return append(member(std::vector<std::string>()), flagNodePortAddresses(flag, v));
    case FieldKind::BoolMap:
      for (const auto& [gate, on] : flagGates(flag, v)) member(std::map<std::string, bool>())[gate] = on;
      return;
    case FieldKind::VModules: return append(member(std::vector<VModule>()), flagVModule(flag, v));
  }
}

bool isListKind(FieldKind k) {
  return k == FieldKind::TextList || k == FieldKind::AddressList || k == FieldKind::BoolMap || k == FieldKind::VModules;
}

// The flags that set a configuration field take what they do from the field table (fields.h).
std::vector<FlagSpec> withFieldFlags(std::vector<FlagSpec> table) {
  for (FlagSpec& flag : table) {
    std::vector<const ConfigField*> fields = fieldsOfFlag(flag.name);
    if (fields.empty()) continue;
    const std::string name = flag.name;
    flag.apply = [fields, name](Loaded& l, S v) {
      for (const ConfigField* field : fields) applyToField(*field, name, v, l.config);
    };
    flag.list = isListKind(fields.front()->kind);
  }
  return table;
}

}  // namespace

const std::vector<FlagSpec>& flagTable() {
  static const std::vector<FlagSpec> table = withFieldFlags(makeTable());
  return table;
}

const FlagSpec* findFlag(const std::string& name) {
  for (const FlagSpec& f : flagTable())
    if (name == f.name) return &f;
  return nullptr;
}

const char* valueWhenBare(const FlagSpec& f) {
  std::string type = f.type;
  return type == "bool" || type == "version" ? "true" : nullptr;
}

}  // namespace kpn::config
