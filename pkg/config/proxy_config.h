// The daemon's whole configuration: upstream's KubeProxyConfiguration
// (kubeproxy.config.k8s.io/v1alpha1) as a value type, with upstream's defaults, plus the few
// settings of our own that have no field there. It comes from --config or from the flags
// (pkg/config/command_line.h); main() reads settings only from here.
//
// Members are named as upstream's JSON names the fields, nested as the document nests them:
// a member's path is its field's path (fields.h reads, writes and compares them through that).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kpn::config {

using Duration = std::chrono::nanoseconds;

inline constexpr const char* kApiVersion = "kubeproxy.config.k8s.io/v1alpha1";
inline constexpr const char* kKind = "KubeProxyConfiguration";

struct ClientConnection {
  std::string kubeconfig;
  std::string acceptContentTypes;                             // accepted, not used (we speak JSON)
  std::string contentType = "application/vnd.kubernetes.protobuf";  // accepted, not used
  float qps = 5;
  int32_t burst = 10;
};

struct VModule {
  std::string filePattern;
  int32_t verbosity = 0;
};

struct LogFormatOptions {
  bool splitStream = false;
  std::string infoBufferSize = "0";  // a resource quantity, kept as text
};

struct LoggingOptions {
  LogFormatOptions text, json;
};

struct Logging {
  std::string format = "text";
  Duration flushFrequency = std::chrono::seconds(5);
  int32_t verbosity = 0;
  std::vector<VModule> vmodule;
  LoggingOptions options;
};

struct NFTables {
  int32_t masqueradeBit = 14;
  bool masqueradeAll = false;
  Duration syncPeriod = std::chrono::seconds(30);
  Duration minSyncPeriod = std::chrono::seconds(1);
};

struct IPTables {
  int32_t masqueradeBit = 14;
  bool masqueradeAll = false;
  bool localhostNodePorts = true;   // iptables mode only: never in nftables mode
  bool snatNodeInternalIP = false;  // accepted, not honoured
  Duration syncPeriod = std::chrono::seconds(30);
  Duration minSyncPeriod = std::chrono::seconds(1);
};

struct IPVS {
  Duration syncPeriod = std::chrono::seconds(30);
  Duration minSyncPeriod{0};
  std::string scheduler;  // kept for the scheduler work: read, validated, not honoured yet
  std::vector<std::string> excludeCIDRs;
  bool strictARP = false;
  Duration tcpTimeout{0}, tcpFinTimeout{0}, udpTimeout{0};
};

struct Winkernel {
  std::string networkName, sourceVip, rootHnsEndpointName;
  bool enableDSR = false, forwardHealthCheckVip = false;
};

struct DetectLocal {
  std::string bridgeInterface;
  std::string interfaceNamePrefix;
};

// 0 (or 0s) means "leave the kernel's value as it is", as upstream.
struct Conntrack {
  int32_t maxPerCore = 32 * 1024;
  int32_t min = 128 * 1024;
  Duration tcpEstablishedTimeout = std::chrono::hours(24);
  Duration tcpCloseWaitTimeout = std::chrono::hours(1);
  bool tcpBeLiberal = false;
  Duration udpTimeout{0};
  Duration udpStreamTimeout{0};
};

struct ProxyConfig {
  std::map<std::string, bool> featureGates;  // logged; no gate is implemented
  ClientConnection clientConnection;
  Logging logging;
  std::string hostnameOverride;
  std::string bindAddress = "0.0.0.0";
  std::string healthzBindAddress = "0.0.0.0:10256";
  std::string metricsBindAddress = "127.0.0.1:10249";  // "" or port 0: no metrics server
  bool bindAddressHardFail = false;
  bool enableProfiling = false;            // accepted, not honoured
  std::string showHiddenMetricsForVersion;  // accepted, not honoured
  std::string mode;  // "" and "nftables" run; "iptables" and "ipvs" run in nftables mode, with a warning
  IPTables iptables;  // its masquerade and sync fields apply when the file has no nftables section
  IPVS ipvs;
  NFTables nftables;  // what the daemon runs with (see decode.h for where absent fields come from)
  Winkernel winkernel;
  std::string detectLocalMode;  // "" is ClusterCIDR
  DetectLocal detectLocal;
  std::string clusterCIDR;
  std::vector<std::string> nodePortAddresses;  // empty: "primary" (nftables mode's default)
  int32_t oomScoreAdj = -999;
  Conntrack conntrack;
  Duration configSyncPeriod = std::chrono::minutes(15);
  std::string portRange;  // unused upstream too; logged when set
  bool windowsRunAsService = false;

};

// klog's own logging flags (--logtostderr, --log-file, --skip-headers, ...). Upstream removed
// them in 1.26 (KEP-2845) but older manifests still pass them: accepted with klog's meaning, for
// the text format only (pkg/logging/output.h).
struct KlogFlags {
  bool logToStderr = true;
  bool alsoLogToStderr = false;
  int32_t stderrThreshold = 2;  // ERROR: with --logtostderr=false, what is copied to stderr
  std::string logFile;          // one file, appended to (klog truncates it at logFileMaxSizeMB)
  std::string logDir;           // glog/klog's per-severity files, named program.host.user.log.SEVERITY...
  uint32_t logFileMaxSizeMB = 1800;
  bool oneOutput = false, skipHeaders = false, skipLogHeaders = false, addDirHeader = false;
  std::string logBacktraceAt;  // FILE:LINE
};

// Settings the daemon takes only from flags (they have no KubeProxyConfiguration field), so they
// apply with or without --config.
struct DaemonOptions {
  std::string configFile;     // --config
  std::string writeConfigTo;  // --write-config-to
  std::string master;         // --master: overrides the kubeconfig's server
  std::string kubeconfigContext;
  std::string serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::string manifests;
  bool dryRun = false;
  bool cleanup = false;
  bool cleanupIptables = true;  // --cleanup-iptables: remove upstream's iptables-mode leftovers
  bool initOnly = false;  // --init-only: probe, OOM score, conntrack sysctls, then exit
  bool endpointConnectionMetrics = false;  // --endpoint-connection-metrics: per-endpoint gauges (least connection)
  // --status-socket: where the daemon answers `status` and `trace` (pkg/diag/local_socket.h):
  // @NAME (abstract) or a path; empty: none.
  std::string statusSocket = "@kube-proxy-nft/status";
  std::vector<std::string> probeFakeRequirements;  // test only: requirements no kernel meets
  KlogFlags klog;
};

// Whole configurations compare field by field through the field table (fields.h): the
// --write-config-to round trip and the unit tests compare them.
bool operator==(const ProxyConfig& a, const ProxyConfig& b);
inline bool operator!=(const ProxyConfig& a, const ProxyConfig& b) { return !(a == b); }
bool operator==(const VModule& a, const VModule& b);
bool operator==(const KlogFlags& a, const KlogFlags& b);
inline bool operator!=(const KlogFlags& a, const KlogFlags& b) { return !(a == b); }

}  // namespace kpn::config
