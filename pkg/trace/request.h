// The `trace` subcommand's own flags (--from, --src, --dst, --proto, --iif, --output) read from
// the command line, and the packet they describe. The daemon's flags beside them (a source such as
// --manifests, --cluster-cidr, --config, ...) are left for pkg/config's parser.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nft/evaluator.h"

namespace kpn::trace {

enum class From { Pod, Node, External };
enum class Output { Text, Json };

struct Request {
  From from = From::Pod;
  std::string src, dst;  // canonical addresses
  std::optional<uint16_t> sport;
  uint16_t dport = 0;
  std::string proto;  // tcp | udp | sctp
  std::string iif;    // empty: the interface of the route back to --src (pod, external)
  Output output = Output::Text;
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

}  // namespace kpn::trace
