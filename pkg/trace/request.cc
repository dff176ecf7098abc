#include "pkg/trace/request.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "pkg/net/ip.h"

namespace kpn::trace {

namespace {

const char* kTraceFlags[] = {"from", "src", "dst", "proto", "iif", "output", "service"};

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

bool isLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// "NS/NAME[:PORT]": PORT a number or a port name.
bool parseServiceFlag(const std::string& text, ServiceTarget* t, std::string* why) {
  auto slash = text.find('/');
  if (slash == std::string::npos) return *why = "NAMESPACE/NAME[:PORT]", false;
  std::string rest = text.substr(slash + 1);
  t->ns = text.substr(0, slash);
  auto colon = rest.find(':');
  t->name = rest.substr(0, colon);
  if (colon != std::string::npos) {
    t->port = rest.substr(colon + 1);
    // A port name has a letter (IANA service names do): all digits is a number out of range.
    bool name = isLabel(t->port) && t->port.find_first_not_of("0123456789-") != std::string::npos;
    if (!portOf(t->port) && !name) return *why = "port \"" + t->port + "\" is neither 1..65535 nor a port name", false;
  }
  if (!isLabel(t->ns) || !isLabel(t->name))
    return *why = "namespace and name are DNS-1123 labels (lowercase letters, digits, '-')", false;
  return true;
}

// "NAME.NS[.svc[.DOMAIN...]]:PORT", the way a pod names a Service in DNS.
bool parseServiceName(const std::string& text, ServiceTarget* t, std::string* why) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return *why = "NAME.NAMESPACE[.svc[.cluster.local]]:PORT", false;
  std::string host = text.substr(0, colon), port = text.substr(colon + 1);
  if (!portOf(port)) return *why = "port \"" + port + "\" is not 1..65535", false;
  std::vector<std::string> labels;
  size_t start = 0;
  for (;;) {
    size_t dot = host.find('.', start);
    labels.push_back(host.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (labels.size() < 2 || (labels.size() > 2 && labels[2] != "svc"))
    return *why = "\"" + host + "\" is neither an IP address nor NAME.NAMESPACE[.svc[.cluster.local]]", false;
  for (const auto& l : labels)
    if (!isLabel(l)) return *why = "\"" + l + "\" is not a DNS-1123 label", false;
  t->name = labels[0];
  t->ns = labels[1];
  t->port = port;
  t->dnsName = true;
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
  Request& r = out.request;
  std::string why;
  // A --dst that is not an address names a Service the way DNS does.
  if (given.count("service") && given.count("dst")) return fail("--service and --dst name two targets; give one");
  if (given.count("service")) {
    ServiceTarget t;
    if (!parseServiceFlag(given["service"], &t, &why)) return fail("--service=" + given["service"] + ": " + why);
    r.service = t;
  } else if (given.count("dst")) {
    std::string ip;
    std::optional<uint16_t> port;
    std::string host = given["dst"].substr(0, given["dst"].rfind(':'));
    bool looksLikeName = !host.empty() && host[0] != '[' && std::count(host.begin(), host.end(), ':') == 0 &&
                         host.find_first_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos;
    if (looksLikeName) {
      ServiceTarget t;
      if (!parseServiceName(given["dst"], &t, &why)) return fail("--dst=" + given["dst"] + ": " + why);
      r.service = t;
    }
  }
  const bool byService = r.service.has_value();
  const char* required[] = {"from", "src", "dst", "proto"};
  for (const char* f : required)
    if (!byService && !given.count(f)) return fail(std::string("--") + f + " is required");
  const std::string from = given.count("from") ? given["from"] : "node";
  if (from == "pod") r.from = From::Pod;
  else if (from == "node") r.from = From::Node;
  else if (from == "external") r.from = From::External;
  else return fail("--from=" + from + ": pod, node or external");
  if (byService) {
    if (given.count("src")) {
      std::string list = given["src"];
      for (size_t start = 0;;) {
        size_t comma = list.find(',', start);
        std::string one = list.substr(start, comma - start), ip;
        std::optional<uint16_t> sport;
        if (!splitHostPort(one, &ip, &sport, &why)) return fail("--src=" + list + ": " + why);
        for (const auto& have : r.srcs)
          if (net::familyOf(have) == net::familyOf(ip)) return fail("--src=" + list + ": one address per IP family");
        r.srcs.push_back(ip);
        if (sport) r.sport = sport;
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (r.from != From::Node) {
      return fail("--src is required with --from=" + from + " (one address per IP family: --src=IPv4,IPv6)");
    }
  } else {
    if (!splitHostPort(given["src"], &r.src, &r.sport, &why)) return fail("--src=" + given["src"] + ": " + why);
    std::optional<uint16_t> dport;
    if (!splitHostPort(given["dst"], &r.dst, &dport, &why)) return fail("--dst=" + given["dst"] + ": " + why);
    if (!dport) return fail("--dst=" + given["dst"] + ": IP:PORT (an IPv6 address as [IP]:PORT)");
    r.dport = *dport;
    if (net::familyOf(r.src) != net::familyOf(r.dst)) return fail("--src and --dst are of different IP families");
  }
  if (given.count("proto") || !byService) {
    r.proto = given["proto"];
    if (r.proto != "tcp" && r.proto != "udp" && r.proto != "sctp") return fail("--proto=" + r.proto + ": tcp, udp or sctp");
  }
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
  return packetTo(r, r.src, r.dst, r.dport, r.proto, iif);
}

nft::eval::Packet packetTo(const Request& r, const std::string& src, const std::string& dst, uint16_t dport,
                           const std::string& proto, const std::string& iif) {
  nft::eval::Packet p;
  p.family = net::familyOf(dst) == net::Family::V6 ? nft::Family::IPv6 : nft::Family::IPv4;
  p.saddr = src;
  if (r.sport) p.sport = *r.sport;
  p.daddr = dst;
  p.dport = dport;
  p.protocol = proto;
  p.entry = r.from == From::Node ? nft::eval::Entry::Output : nft::eval::Entry::Prerouting;
  p.iifname = r.from == From::Node ? "" : iif;
  return p;
}

std::string sourceFor(const Request& r, net::Family f) {
  for (const auto& s : r.srcs)
    if (net::familyOf(s) == f) return s;
  if (!r.src.empty() && net::familyOf(r.src) == f) return r.src;
  return "";
}

}  // namespace kpn::trace
