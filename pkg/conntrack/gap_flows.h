// Conntrack entries left by the window in which our rules were being (re)built. A commit that
// creates our NAT chains (a node's first sync, the repair after `nft flush ruleset`, a rebuild
// after a failed commit) turns conntrack on while the kernel prepares the batch, some
// milliseconds before the rules take effect: a SYN in that window gets an entry with a null NAT
// binding, kept 120 s (SYN_SENT). Its retransmissions, and any new connection from the same
// source port while the entry lives, follow it and are never DNATed: the service IP itself
// rejects them (measured: ECONNREFUSED). After such a sync one pass deletes the TCP and SCTP
// entries to a service frontend that carry no DNAT and never saw a reply; the next packet of the
// connection makes a new entry, which the rules DNAT. An entry that saw a reply is a working
// connection and is kept. UDP is the reconciler's (frontends.h): it already deletes un-DNATed
// flows to frontends with endpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>

#include "pkg/conntrack/flow.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::conntrack {

class GapFrontends {
 public:
  // Every proxied service's TCP and SCTP frontends in AF_INET or AF_INET6, endpoints or not.
  static GapFrontends build(const state::ClusterState& st, const services::NodeConfig& cfg, uint8_t family);

  bool empty() const { return byIpPort_.empty() && nodePorts_.empty(); }
  bool hasProto(uint8_t proto) const;
  // To a frontend of its protocol (or any address with a NodePort, as upstream matches them),
  // answered by nobody, and not DNATed (its reply would come from the destination itself).
  bool isGapFlow(const Flow& f) const;

 private:
  struct Key {
    uint8_t proto;
    Ip ip;
    uint16_t port;
    bool operator==(const Key& o) const { return proto == o.proto && port == o.port && ip == o.ip; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return IpHash()(k.ip) ^ ((size_t(k.proto) << 16 | k.port) * 0x9E3779B97F4A7C15ull);
    }
  };
  static uint32_t nodePortKey(uint8_t proto, uint16_t port) { return uint32_t(proto) << 16 | port; }
  std::unordered_set<Key, KeyHash> byIpPort_;
  std::unordered_set<uint32_t> nodePorts_;
  std::unordered_set<uint8_t> protos_;
};

// What one sweep needs, built on the sync thread and handed to the cleanup worker.
struct GapSweep {
  GapFrontends v4, v6;
};
using GapSnapshot = std::shared_ptr<const GapSweep>;

GapSnapshot makeGapSweep(const state::ClusterState& st, const services::NodeConfig& cfg);

}  // namespace kpn::conntrack
