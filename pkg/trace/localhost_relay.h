// A node's TCP connection to its own loopback address on a NodePort, where the table serves
// localhost NodePorts (pkg/render/localhost_nodeports.h: the family's table has the
// localhost-nodeports set): the kernel delivers it to kube-proxy-nft's listener on 127.0.0.1 /
// ::1, which opens its own connection to one endpoint. The listener's choice follows the
// NodePort's traffic policy as outside traffic to a NodePort address does (eTP=Cluster: every
// endpoint; eTP=Local: this node's; none: no listener, refused), so it is traced as that: the same
// table, a packet from a stand-in outside address to a stand-in NodePort address. The endpoint
// sees the node's address toward it (the kernel's choice for the listener's connection).
#pragma once

#include <vector>

#include "nft/eval_table.h"
#include "nft/trace_report.h"
#include "pkg/net/ip.h"
#include "pkg/trace/node_view.h"

namespace kpn::trace {

// Rewrites `report` (of a packet from the node) when it is such a connection; otherwise leaves it.
void explainLocalhostNodePort(const nft::eval::EvalTable& table, const net::HostAddresses& host,
                              const std::vector<nft::eval::Route>& routes, const SourceChooser& choose,
                              nft::eval::Report& report);

}  // namespace kpn::trace
