// Kubernetes API objects, reduced to the fields a service proxy reads.
// Plain value types: decoded once at the edge, compared and copied freely afterwards.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pkg/api/interned.h"

namespace kpn::api {

enum class Protocol { TCP, UDP, SCTP };
enum class IPFamily { V4, V6 };

// "tcp" / "udp" / "sctp": the spelling nft and chain names use.
const char* protocolName(Protocol p);

// The labels and annotations something in the proxy reads (services/proxied.h, services/scheduler.h,
// services/environment.cc, kube/wire.h): decode keeps only these. Every other one is still checked
// (a value that is not a string refuses the object, as the API server would) and then dropped:
// the state lives as long as the daemon, and what nothing reads was most of its metadata (at 10k
// services x 10 endpoints the EndpointSlices' controller labels alone were ~3.5 MB of the settled
// heap; a Service applied with kubectl carries its whole manifest as an annotation).
inline constexpr std::string_view kReadLabels[] = {"service.kubernetes.io/service-proxy-name",
                                                   "service.kubernetes.io/headless", "topology.kubernetes.io/zone"};
inline constexpr std::string_view kReadAnnotations[] = {"kube-proxy-nft.io/scheduler",
                                                        "endpoints.kubernetes.io/last-change-trigger-time"};

struct ObjectMeta {
  std::string ns;    // "default" when the manifest had none
  std::string name;
  std::map<std::string, std::string> labels;       // of kReadLabels only
  std::map<std::string, std::string> annotations;  // of kReadAnnotations only
  std::string creationTimestamp;  // RFC 3339 as printed by the API server; "" when absent
  std::string resourceVersion;
};

struct ServicePort {
  std::string name;       // may be empty for a single-port service
  Protocol protocol = Protocol::TCP;
  int32_t port = 0;       // 1..65535
  int32_t nodePort = 0;   // 0 when unset (or out of range: dropped with a warning)
  std::string targetPort; // informational: the endpoint port comes from the EndpointSlice
};

struct LoadBalancerIngress {
  std::string ip;        // canonical text form, "" when only a hostname was given
  std::string hostname;
  std::string ipMode;    // "VIP", "Proxy" or ""
};

struct Service {
  ObjectMeta meta;
  std::string type = "ClusterIP";        // ClusterIP | NodePort | LoadBalancer | ExternalName
  std::string externalName;              // ExternalName: the DNS name it aliases (not proxied)
  std::vector<std::string> clusterIPs;   // canonical text; "None" is kept out (headless below)
  bool headless = false;                 // clusterIP: None
  std::vector<ServicePort> ports;
  std::vector<std::string> externalIPs;               // canonical; invalid ones are dropped with a warning
  std::vector<std::string> loadBalancerSourceRanges;  // canonical CIDRs
  // Some loadBalancerSourceRanges entry could not be read: dropping it would widen access (with
  // no range left, every source), so the firewall admits no source at all.
  bool sourceRangeUnreadable = false;
  std::vector<LoadBalancerIngress> loadBalancerIngress;
  std::string externalTrafficPolicy = "Cluster";
  std::string internalTrafficPolicy = "Cluster";
  std::string sessionAffinity = "None";
  int32_t sessionAffinityTimeoutSeconds = 10800;
  int32_t healthCheckNodePort = 0;
  std::string trafficDistribution;
};

struct EndpointPort {
  std::string name;
  Protocol protocol = Protocol::TCP;
  std::optional<int32_t> port;  // absent port: the endpoint is unusable for this port
};

struct EndpointConditions {
  std::optional<bool> ready, serving, terminating;
  // Upstream semantics: a missing ready or serving counts as true.
  bool isReady() const { return !ready || *ready; }
  bool isServing() const { return !serving || *serving; }
  bool isTerminating() const { return terminating && *terminating; }
};

// One endpoint of a slice. 100k of them at 10k services x 10 endpoints make this the bulk of the
// decoded state, so the layout keeps the common case small (72 bytes, no allocation for an IPv4
// endpoint): the one address proxies use inline, node and zone names interned, and what most
// endpoints lack (more addresses, topology hints) in one shared side allocation only when present.
struct Endpoint {
  // The first address (canonical text, of the slice's address type): the one a proxy uses, as
  // upstream does (an endpoint's addresses are all one pod). "" only in hand-built endpoints.
  std::string address;
  EndpointConditions conditions;
  InternedString nodeName;
  InternedString zone;

  // Every address, the first one first.
  std::vector<std::string> addresses() const;
  void setAddresses(std::vector<std::string> all);
  // hints.forZones[].name and hints.forNodes[].name.
  const std::vector<std::string>& hintZones() const;
  const std::vector<std::string>& hintNodes() const;
  void setHints(std::vector<std::string> zones, std::vector<std::string> nodes);

 private:
  struct Rare {
    std::vector<std::string> moreAddresses;  // after the first
    std::vector<std::string> hintZones, hintNodes;
  };
  void setRare(Rare r);
  std::shared_ptr<const Rare> rare_;  // null when all three are empty; immutable, so copies share it
  friend bool operator==(const Endpoint& a, const Endpoint& b);
};

struct EndpointSlice {
  ObjectMeta meta;
  std::string serviceName;  // label kubernetes.io/service-name
  std::string addressType;  // IPv4 | IPv6 | FQDN
  std::vector<EndpointPort> ports;
  std::vector<Endpoint> endpoints;
};

struct Node {
  ObjectMeta meta;
  std::vector<std::string> podCIDRs;
  std::vector<std::pair<std::string, std::string>> addresses;  // (type, address)
  std::string deletionTimestamp;       // metadata.deletionTimestamp: "" unless the Node is being deleted
  std::vector<std::string> taintKeys;  // spec.taints[].key (ToBeDeletedByClusterAutoscaler: on its way out)
};

// networking.k8s.io/v1 ServiceCIDR: the ranges ClusterIPs are allocated from. Cluster-scoped.
struct ServiceCIDR {
  ObjectMeta meta;
  std::vector<std::string> cidrs;  // canonical network addresses ("10.96.0.0/16"), at most one per family
};

inline bool operator==(const ObjectMeta& a, const ObjectMeta& b) {
  return a.ns == b.ns && a.name == b.name && a.labels == b.labels &&
         a.annotations == b.annotations && a.creationTimestamp == b.creationTimestamp &&
         a.resourceVersion == b.resourceVersion;
}
bool operator==(const ServicePort& a, const ServicePort& b);
bool operator==(const LoadBalancerIngress& a, const LoadBalancerIngress& b);
bool operator==(const EndpointPort& a, const EndpointPort& b);
bool operator==(const EndpointConditions& a, const EndpointConditions& b);
bool operator==(const Endpoint& a, const Endpoint& b);
bool operator==(const Service& a, const Service& b);
bool operator==(const EndpointSlice& a, const EndpointSlice& b);
bool operator==(const Node& a, const Node& b);
bool operator==(const ServiceCIDR& a, const ServiceCIDR& b);

}  // namespace kpn::api
