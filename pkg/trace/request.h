// The `trace` subcommand's own flags (--from, --src, --dst, --proto, --iif, --output, --service)
// read from the command line, and the packet they describe. The daemon's flags beside them (a
// source such as --manifests, --cluster-cidr, --config, ...) are left for pkg/config's parser.
//
// Two kinds of target: an address (--dst=IP:PORT, one packet), or a Service by name
// (--service=NS/NAME[:PORT], every address it has on this node; --dst=NAME.NS[.svc[.DOMAIN]]:PORT,
// the addresses its DNS name resolves to: the ClusterIPs, or a headless Service's endpoints).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nft/evaluator.h"
#include "pkg/net/ip.h"

namespace kpn::trace {

enum class From { Pod, Node, External };
enum class Output { Text, Json };

struct ServiceTarget {
  std::string ns, name;
  std::string port;  // a port name or number ("" for every port)
  bool dnsName = false;  // from --dst=NAME.NS...: only what its DNS name resolves to
};

struct Request {
  From from = From::Pod;
  std::string src, dst;  // canonical addresses (dst: address targets only)
  // Service targets: a source per family (--src=IP[,IP]); none with --from=node (the kernel's
  // choice toward each address).
  std::vector<std::string> srcs;
  std::optional<uint16_t> sport;
  uint16_t dport = 0;
  std::string proto;  // tcp | udp | sctp; for a service target "" (every protocol of its ports)
  std::string iif;    // empty: the interface of the route back to --src (pod, external)
  Output output = Output::Text;
  std::optional<ServiceTarget> service;
};

struct Parsed {
  Request request;
  std::vector<std::string> rest;  // every other argument, in order, for pkg/config's parser
};

// argv without the program name and the word "trace". On a bad or missing trace flag: nullopt
// and *error says which, in one line.
std::optional<Parsed> parseRequest(const std::vector<std::string>& args, std::string* error);

// The packet of a request; `iif` is the interface it arrives on (prerouting), "" from the node.
nft::eval::Packet packetOf(const Request& r, const std::string& iif);
// The packet to one address of a service target: from the request's source of that family
// (`src`), to `dst`:`dport` over `proto`.
nft::eval::Packet packetTo(const Request& r, const std::string& src, const std::string& dst, uint16_t dport,
                           const std::string& proto, const std::string& iif);
// The request's source for a family; "" when none was given (from the node: the kernel picks).
std::string sourceFor(const Request& r, net::Family f);

}  // namespace kpn::trace
