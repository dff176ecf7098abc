// What the evaluator must know of this node to trace a packet as the kernel would: its own
// addresses, its routes (the interface a packet arrives on or leaves by) and the source address
// the kernel picks toward a destination (what a masqueraded packet leaves with).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nft/eval/evaluator.h"
#include "pkg/net/ip.h"

namespace kpn::trace {

// The main routing table of this network namespace (/proc/net/route, /proc/net/ipv6_route).
std::vector<nft::eval::Route> readRoutes();
// The interface of the most specific route containing `ip`; "" when none does.
std::string routeInterface(const std::vector<nft::eval::Route>& routes, const std::string& ip);

// The source address the kernel chooses for a packet to `ip` (a UDP socket connected to it: no
// packet is sent). nullopt when there is no route.
std::optional<std::string> sourceAddressToward(const std::string& ip);

using SourceChooser = std::function<std::optional<std::string>(const std::string& destination)>;

// The environment for one packet: the host's addresses, its routes, and as masquerade source the
// address chosen toward the packet's destination (refined per candidate by refineMasquerade).
nft::eval::Environment environmentFor(const net::HostAddresses& host, const std::vector<nft::eval::Route>& routes,
                                      const nft::eval::Packet& p, const SourceChooser& choose);

// A masqueraded candidate leaves with the address chosen toward its own endpoint.
void refineMasquerade(nft::eval::Trace& t, const SourceChooser& choose);

}  // namespace kpn::trace
