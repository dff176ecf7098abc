// What a trace knows of the cluster beyond the table: a cluster state (the running daemon's, asked
// over its status socket, or a source flag's), the node configuration it renders with, and the
// daemon's word on itself. The causes (causes.h) and the drift (drift.h) are read from it.
#pragma once

#include <optional>
#include <string>

#include "pkg/api/types.h"
#include "pkg/diag/daemon_status.h"
#include "pkg/diag/state_query.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::trace {

struct KnownState {
  std::string origin;  // "daemon" | "source"
  state::ClusterState state;
  services::NodeConfig cfg;
  std::optional<diag::DaemonStatus> daemon;  // with origin "daemon"
  std::optional<api::Service> excluded;      // a Service asked for by name, labelled not ours
  uint64_t servicesKnown = 0;                // the whole state's, not only what was sent

  std::vector<const api::EndpointSlice*> slicesOf(const std::string& key) const;
  const api::Service* service(const std::string& key) const;
};

// The daemon's answer as a KnownState: its configuration decoded as --config would be (with its
// node name), its objects into a ClusterState. nullopt and *error when the configuration does not
// decode.
std::optional<KnownState> knownFromDaemon(diag::StateAnswer answer, std::string* error);
// Fills a ClusterState from decoded objects (slices without a service-name label are left out).
void fillState(state::ClusterState& st, api::DecodedObjects objects);

// The Service a packet to ip:port/proto is about: one that has ip as a ClusterIP, external or
// LoadBalancer IP and the port (or has ip and no such port: *ipOnly), else, when ip is one of
// this node's NodePort addresses, one with the nodePort.
const api::Service* serviceAt(const KnownState& k, const std::string& ip, uint16_t port, const std::string& proto,
                              bool nodePortAddress, bool* ipOnly);

}  // namespace kpn::trace
