// The named counters a family's table keeps of the loopback packets to UDP and SCTP NodePorts it
// rejects (NodePorts on loopback: render/localhost_nodeports.h writes them, the metrics read them
// as kubeproxy_nftables_localhost_nodeport_rejected_packets_total).
#pragma once

#include <string>
#include <vector>

#include "pkg/api/types.h"

namespace kpn::services {

// "localhost-nodeport-rejected-udp" / "-sctp": the named counter of a protocol's rejects.
std::string localhostRejectCounter(api::Protocol proto);
// The protocols that have one (TCP is answered by the listeners).
std::vector<api::Protocol> localhostRejectedProtocols();

}  // namespace kpn::services
