#include "pkg/trace/request.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "pkg/net/ip.h"

namespace kpn::trace {

namespace {

const char* kTraceFlags[] = {"from", "src", "dst", "proto", "iif", "output"};

std::optional<uint16_t> portOf(const std::string& text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  long v = std::strtol(text.c_str(), nullptr, 10);
  if (v < 1 || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// "IP", "IPv4:PORT", "[IPv6]:PORT" or a bare IPv6 literal.
bool splitHostPort(const std::string& text, std::string* ip, std::optional<uint16_t>* port, std::string* why) {
  std::string host = text, portText;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) return *why = "an unclosed '['", false;
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return *why = "text after ']' that is not :PORT", false;
      portText = text.substr(close + 2);
      if (portText.empty()) return *why = "an empty port", false;
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    host = text.substr(0, text.find(':'));
    portText = text.substr(text.find(':') + 1);
    if (portText.empty()) return *why = "an empty port", false;
  }
  auto canon = net::canonicalIp(host);
  if (!canon) return *why = "\"" + host + "\" is not an IP address", false;
  *ip = *canon;
  if (!portText.empty()) {
    *port = portOf(portText);
    if (!*port) return *why = "port \"" + portText + "\" is not 1..65535", false;
  }
  return true;
}

}  // namespace

std::optional<Parsed> parseRequest(const std::vector<std::string>& args, std::string* error) {
  Parsed out;
  std::map<std::string, std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string body = a.rfind("--", 0) == 0 ? a.substr(2) : a.rfind("-", 0) == 0 ? a.substr(1) : "";
    std::string name = body.substr(0, body.find('='));
    bool ours = false;
    for (const char* f : kTraceFlags) ours = ours || name == f;
    if (!ours) {
      out.rest.push_back(a);
      continue;
    }
    std::string value;
    if (body.find('=') != std::string::npos) {
      value = body.substr(body.find('=') + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      *error = "trace: --" + name + " needs a value";
      return std::nullopt;
    }
    if (given.count(name)) {
      *error = "trace: --" + name + " is given twice";
      return std::nullopt;
    }
    given[name] = value;
  }
  auto fail = [&](const std::string& msg) {
    *error = "trace: " + msg;
    return std::nullopt;
  };
  for (const char* required : {"from", "src", "dst", "proto"})
    if (!given.count(required)) return fail(std::string("--") + required + " is required");
  Request& r = out.request;
  const std::string& from = given["from"];
  if (from == "pod") r.from = From::Pod;
  else if (from == "node") r.from = From::Node;
  else if (from == "external") r.from = From::External;
  else return fail("--from=" + from + ": pod, node or external");
  std::string why;
  if (!splitHostPort(given["src"], &r.src, &r.sport, &why)) return fail("--src=" + given["src"] + ": " + why);
  std::optional<uint16_t> dport;
  if (!splitHostPort(given["dst"], &r.dst, &dport, &why)) return fail("--dst=" + given["dst"] + ": " + why);
  if (!dport) return fail("--dst=" + given["dst"] + ": IP:PORT (an IPv6 address as [IP]:PORT)");
  r.dport = *dport;
  if (net::familyOf(r.src) != net::familyOf(r.dst)) return fail("--src and --dst are of different IP families");
  r.proto = given["proto"];
  if (r.proto != "tcp" && r.proto != "udp" && r.proto != "sctp") return fail("--proto=" + r.proto + ": tcp, udp or sctp");
  if (given.count("iif")) {
    r.iif = given["iif"];
    if (r.iif.empty() || r.iif.size() > 15 || r.iif.find_first_of(" \t\n/") != std::string::npos)
      return fail("--iif=" + r.iif + ": not an interface name");
    if (r.from == From::Node) return fail("--iif: the node's own packets have no input interface");
  }
  if (given.count("output")) {
    const std::string& o = given["output"];
    if (o == "text") r.output = Output::Text;
    else if (o == "json") r.output = Output::Json;
    else return fail("--output=" + o + ": text or json");
  }
  return out;
}

nft::eval::Packet packetOf(const Request& r, const std::string& iif) {
  nft::eval::Packet p;
  p.family = net::familyOf(r.dst) == net::Family::V6 ? nft::Family::IPv6 : nft::Family::IPv4;
  p.saddr = r.src;
  if (r.sport) p.sport = *r.sport;
  p.daddr = r.dst;
  p.dport = r.dport;
  p.protocol = r.proto;
  p.entry = r.from == From::Node ? nft::eval::Entry::Output : nft::eval::Entry::Prerouting;
  p.iifname = r.from == From::Node ? "" : iif;
  return p;
}

}  // namespace kpn::trace
