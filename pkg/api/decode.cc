// Object decoding. Each decoder walks the fields it knows and ignores the rest. Problems are
// thrown as Invalid from deep inside and caught once per object (the object is skipped) or once
// per endpoint / node address (just that part is dropped), so that the happy path stays free of
// error plumbing and costs nothing extra.
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "pkg/api/decode_json.h"
#include "pkg/api/validate.h"
#include "pkg/api/yaml_json.h"
#include "pkg/net/ip.h"

namespace kpn::api {
namespace {

using JV = rapidjson::Value;

struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a value sits in its object ("spec.ports[1].port"). Lives on the stack next to the value
// it names and is only turned into text when something is wrong.
struct Path {
  const Path* parent = nullptr;
  const char* key = nullptr;  // member name; null for an array element
  size_t index = 0;

  Path operator/(const char* k) const { return Path{this, k, 0}; }
  Path operator[](size_t i) const { return Path{this, nullptr, i}; }
  std::string str() const {
    std::string s = parent ? parent->str() : std::string();
    if (key) {
      if (!s.empty() && *key) s += '.';
      s += key;
    } else {
      s += "[" + std::to_string(index) + "]";
    }
    return s;
  }
};
const Path kRoot{nullptr, "", 0};

[[noreturn]] void fail(const Path& p, const std::string& what) {
  throw Invalid(p.str() + " " + what);
}

const char* typeName(const JV& v) {
  if (v.IsString()) return "a string";
  if (v.IsBool()) return "a bool";
  if (v.IsNumber()) return "a number";
  if (v.IsArray()) return "a list";
  if (v.IsObject()) return "an object";
  return "null";
}

// A member of an object; null when absent or JSON null (kubectl prints `creationTimestamp: null`
// and the like: null means "not set" everywhere).
const JV* field(const JV& obj, const char* key) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

const JV& asObject(const JV& v, const Path& p) {
  if (!v.IsObject()) fail(p, std::string("must be an object, got ") + typeName(v));
  return v;
}

const JV& asArray(const JV& v, const Path& p) {
  if (!v.IsArray()) fail(p, std::string("must be a list, got ") + typeName(v));
  return v;
}

std::string asString(const JV& v, const Path& p) {
  if (!v.IsString()) fail(p, std::string("must be a string, got ") + typeName(v));
  return std::string(v.GetString(), v.GetStringLength());
}

bool asBool(const JV& v, const Path& p) {
  if (!v.IsBool()) fail(p, std::string("must be true or false, got ") + typeName(v));
  return v.GetBool();
}

int64_t asInt(const JV& v, const Path& p) {
  if (!v.IsInt64()) {
    if (v.IsString()) fail(p, "must be an integer, got the string " + quoted(v.GetString()));
    fail(p, std::string("must be an integer, got ") + typeName(v));
  }
  return v.GetInt64();
}

int32_t asIntIn(const JV& v, const Path& p, int64_t lo, int64_t hi) {
  int64_t n = asInt(v, p);
  if (n < lo || n > hi)
    fail(p, std::to_string(n) + " out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  return static_cast<int32_t>(n);
}

std::string stringField(const JV& obj, const char* key, const Path& objPath, std::string def = "") {
  const JV* v = field(obj, key);
  return v ? asString(*v, objPath / key) : def;
}

std::vector<std::string> stringList(const JV& obj, const char* key, const Path& objPath) {
  std::vector<std::string> out;
  const JV* v = field(obj, key);
  if (!v) return out;
  Path p = objPath / key;
  const JV& arr = asArray(*v, p);
  out.reserve(arr.Size());
  for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) out.push_back(asString(arr[i], p[i]));
  return out;
}

// The string map `key` of obj, each value checked to be a string, of the keys in `kept` only.
template <size_t N>
std::map<std::string, std::string> stringMap(const JV& obj, const char* key, const Path& objPath,
                                             const std::string_view (&kept)[N]) {
  std::map<std::string, std::string> out;
  const JV* v = field(obj, key);
  if (!v) return out;
  Path p = objPath / key;
  for (const auto& m : asObject(*v, p).GetObject()) {
    std::string_view k(m.name.GetString(), m.name.GetStringLength());
    // The key may contain dots and slashes; naming it in full is clearer than a path.
    if (!m.value.IsString())
      throw Invalid(p.str() + "[" + quoted(k) + "] must be a string, got " + typeName(m.value));
    if (std::find(std::begin(kept), std::end(kept), k) != std::end(kept))
      out.emplace(std::string(k), std::string(m.value.GetString(), m.value.GetStringLength()));
  }
  return out;
}

// Canonical text (inet_ntop) so that equal addresses are equal strings: "fd00:0::1" -> "fd00::1".
std::string canonicalIp(const std::string& s, const Path& p, IPFamily* fam = nullptr) {
  auto ip = net::canonicalIp(s);
  if (!ip) fail(p, quoted(s) + " is not an IP address");
  if (fam) *fam = net::familyOf(*ip) == net::Family::V4 ? IPFamily::V4 : IPFamily::V6;
  return *std::move(ip);
}

std::string ipField(const JV& v, const Path& p, IPFamily* fam = nullptr) {
  return canonicalIp(asString(v, p), p, fam);
}

// Canonical network address, host bits cleared: "10.1.2.3/8" -> "10.0.0.0/8".
std::string cidrField(const JV& v, const Path& p) {
  std::string s = asString(v, p);
  auto cidr = net::parseCidr(s);
  if (!cidr) fail(p, quoted(s) + " is not a CIDR (address/prefix-length)");
  return cidr->str();
}

Protocol protocolField(const JV& obj, const Path& objPath) {
  const JV* v = field(obj, "protocol");
  if (!v) return Protocol::TCP;
  Path p = objPath / "protocol";
  std::string s = asString(*v, p);
  auto proto = parseProtocol(s);
  if (!proto) fail(p, quoted(s) + " is not TCP, UDP or SCTP");
  return *proto;
}

// ---- metadata ----

// A name as error messages show it: verbatim when it is plain, quoted and escaped when it holds
// spaces, quotes, slashes or control characters (which are exactly the names that get rejected).
std::string printable(const std::string& s) {
  for (unsigned char c : s)
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '/') return quoted(s);
  return s;
}

enum class NameRule { kDns1123Label, kDns1123Subdomain };

// Reads metadata; `named` gets "ns/name" (or just the name when cluster-scoped) as soon as it is
// known, so that an error further on can still name the object.

ObjectMeta decodeMeta(const JV& obj, bool namespaced, NameRule rule, std::string* named) {
  Path p = kRoot / "metadata";
  const JV* mv = field(obj, "metadata");
  if (!mv) fail(p, "is required");
  const JV& m = asObject(*mv, p);
  ObjectMeta meta;
  meta.name = stringField(m, "name", p);
  if (namespaced) meta.ns = stringField(m, "namespace", p, "default");
  if (meta.ns.empty() && namespaced) meta.ns = "default";
  *named = (namespaced ? printable(meta.ns) + "/" : std::string()) + (meta.name.empty() ? "<unnamed>" : printable(meta.name));
  if (meta.name.empty()) fail(p / "name", "is required");
  if (namespaced && !isDns1123Label(meta.ns))
    fail(p / "namespace", quoted(meta.ns) + " is not a DNS-1123 label (lowercase letters, digits, '-'; at most 63)");
  if (rule == NameRule::kDns1123Label && !isDns1123Label(meta.name))
    fail(p / "name", quoted(meta.name) + " is not a DNS-1123 label (lowercase letters, digits, '-'; at most 63)");
  if (rule == NameRule::kDns1123Subdomain && !isDns1123Subdomain(meta.name))
    fail(p / "name", quoted(meta.name) + " is not a DNS-1123 subdomain (lowercase letters, digits, '-', '.'; at most 253)");
  meta.labels = stringMap(m, "labels", p, kReadLabels);
  meta.annotations = stringMap(m, "annotations", p, kReadAnnotations);
  meta.creationTimestamp = stringField(m, "creationTimestamp", p);
  // resourceVersion is a string in the API; a hand-written YAML `resourceVersion: 5` is harmless.
  if (const JV* rv = field(m, "resourceVersion"))
    meta.resourceVersion = rv->IsInt64() ? std::to_string(rv->GetInt64()) : asString(*rv, p / "resourceVersion");
  return meta;
}

// ---- Service ----

ServicePort decodeServicePort(const JV& v, const Path& p, std::vector<std::string>& warnings) {
  const JV& o = asObject(v, p);
  ServicePort sp;
  sp.name = stringField(o, "name", p);
  // The API server checks port names as DNS-1123 labels (up to 63, "--" allowed); only a
  // named targetPort is an IANA service name.
  if (!sp.name.empty() && !isDns1123Label(sp.name))
    fail(p / "name", quoted(sp.name) + " is not a valid port name (a DNS-1123 label: lowercase letters, digits, '-'; at most 63)");
  sp.protocol = protocolField(o, p);
  const JV* port = field(o, "port");
  if (!port) fail(p / "port", "is required");
  sp.port = asIntIn(*port, p / "port", 1, 65535);
  // A bad nodePort costs the service its NodePort, not its ClusterIP.
  if (const JV* np = field(o, "nodePort")) {
    try {
      sp.nodePort = asIntIn(*np, p / "nodePort", 0, 65535);
    } catch (const Invalid& e) {
      warnings.push_back(std::string(e.what()) + "; nodePort dropped");
    }
  }
  // targetPort is informational here (endpoint ports come from the EndpointSlices): a bad one
  // costs only itself. 0 and "" mean unset (the API server defaults them to the port).
  if (const JV* tp = field(o, "targetPort")) {
    try {
      if (tp->IsString()) {
        std::string name = tp->GetString();
        if (!name.empty() && !isIanaServiceName(name))
          fail(p / "targetPort", quoted(name) + " is neither a port number nor a valid port name");
        sp.targetPort = name;
      } else {
        int32_t n = asIntIn(*tp, p / "targetPort", 0, 65535);
        if (n != 0) sp.targetPort = std::to_string(n);
      }
    } catch (const Invalid& e) {
      warnings.push_back(std::string(e.what()) + "; targetPort dropped");
    }
  }
  return sp;
}

void decodeClusterIPs(const JV& spec, const Path& sp, Service& svc) {
  std::vector<std::string> ips = stringList(spec, "clusterIPs", sp);
  std::string single = stringField(spec, "clusterIP", sp);
  const bool fromList = !ips.empty();
  if (!fromList && !single.empty()) ips.push_back(single);
  // The API server keeps clusterIP == clusterIPs[0]; a manifest that disagrees is ambiguous.
  if (!single.empty() && single != ips[0] && net::canonicalIp(single).value_or(single) != net::canonicalIp(ips[0]).value_or(ips[0]))
    fail(sp / "clusterIP", quoted(single) + " differs from clusterIPs[0] " + quoted(ips[0]));
  if (ips.size() == 1 && ips[0] == "None") {
    svc.headless = true;
    return;
  }
  if (ips.size() > 2) fail(sp / "clusterIPs", "has more than two addresses");
  Path lp = sp / (fromList ? "clusterIPs" : "clusterIP");
  IPFamily families[2];
  for (size_t i = 0; i < ips.size(); ++i)
    svc.clusterIPs.push_back(fromList ? canonicalIp(ips[i], lp[i], &families[i]) : canonicalIp(ips[i], lp, &families[i]));
  if (ips.size() == 2 && families[0] == families[1])
    fail(lp, "are both of one IP family (dual-stack needs one IPv4 and one IPv6)");
}

// Runs `part`; a problem in it drops just that part (with a warning naming what was dropped).
template <class F>
void optionalPart(std::vector<std::string>& warnings, const char* dropped, F part) {
  try {
    part();
  } catch (const Invalid& e) {
    warnings.push_back(std::string(e.what()) + "; " + dropped);
  }
}

std::string trimmed(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

Service decodeService(const JV& obj, std::string* named, std::vector<std::string>& warnings) {
  Service svc;
  svc.meta = decodeMeta(obj, true, NameRule::kDns1123Label, named);
  Path sp = kRoot / "spec";
  const JV* specV = field(obj, "spec");
  if (!specV) fail(sp, "is required");
  const JV& spec = asObject(*specV, sp);

  svc.type = stringField(spec, "type", sp, "ClusterIP");
  if (svc.type != "ClusterIP" && svc.type != "NodePort" && svc.type != "LoadBalancer" && svc.type != "ExternalName")
    fail(sp / "type", quoted(svc.type) + " is not ClusterIP, NodePort, LoadBalancer or ExternalName");
  if (svc.type == "ExternalName") svc.externalName = stringField(spec, "externalName", sp);
  decodeClusterIPs(spec, sp, svc);

  if (const JV* ports = field(spec, "ports")) {
    Path pp = sp / "ports";
    const JV& arr = asArray(*ports, pp);
    std::set<std::string> names;
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
      svc.ports.push_back(decodeServicePort(arr[i], pp[i], warnings));
      // Port names become chain names: two equal names (or an unnamed port among several)
      // would collide.
      if (!names.insert(svc.ports.back().name).second || (arr.Size() > 1 && svc.ports.back().name.empty()))
        fail(pp[i] / "name", quoted(svc.ports.back().name) + " is not unique (ports of a multi-port service need distinct names)");
    }
  }

  // External addresses and source ranges: a bad entry is dropped, the rest of the service stays.
  Path ep = sp / "externalIPs";
  if (const JV* eips = field(spec, "externalIPs")) {
    const JV& arr = asArray(*eips, ep);
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i)
      optionalPart(warnings, "external IP dropped", [&] { svc.externalIPs.push_back(ipField(arr[i], ep[i])); });
  }
  Path rp = sp / "loadBalancerSourceRanges";
  if (const JV* ranges = field(spec, "loadBalancerSourceRanges")) {
    const JV& arr = asArray(*ranges, rp);
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
      try {
        // Upstream trims blanks (" 203.0.113.0/25" is accepted by the API server).
        std::string text = trimmed(asString(arr[i], rp[i]));
        auto cidr = net::parseCidr(text);
        if (!cidr) fail(rp[i], quoted(text) + " is not a CIDR (address/prefix-length)");
        svc.loadBalancerSourceRanges.push_back(cidr->str());
      } catch (const Invalid& e) {
        svc.sourceRangeUnreadable = true;
        warnings.push_back(std::string(e.what()) + "; the load balancer admits no source until it is fixed");
      }
    }
  }
  // The old alpha spellings ("OnlyLocal", "Global") are kept verbatim: the renderer decides.
  svc.externalTrafficPolicy = stringField(spec, "externalTrafficPolicy", sp, "Cluster");
  if (svc.externalTrafficPolicy.empty()) svc.externalTrafficPolicy = "Cluster";
  svc.internalTrafficPolicy = stringField(spec, "internalTrafficPolicy", sp, "Cluster");
  if (svc.internalTrafficPolicy.empty()) svc.internalTrafficPolicy = "Cluster";
  svc.sessionAffinity = stringField(spec, "sessionAffinity", sp, "None");
  if (svc.sessionAffinity.empty()) svc.sessionAffinity = "None";
  if (svc.sessionAffinity != "None" && svc.sessionAffinity != "ClientIP")
    fail(sp / "sessionAffinity", quoted(svc.sessionAffinity) + " is not None or ClientIP");
  if (const JV* cfg = field(spec, "sessionAffinityConfig")) {
    Path cp = sp / "sessionAffinityConfig";
    if (const JV* cip = field(asObject(*cfg, cp), "clientIP")) {
      Path ip = cp / "clientIP";
      if (const JV* t = field(asObject(*cip, ip), "timeoutSeconds"))
        svc.sessionAffinityTimeoutSeconds = asIntIn(*t, ip / "timeoutSeconds", 1, 86400);
    }
  }
  if (const JV* h = field(spec, "healthCheckNodePort"))
    optionalPart(warnings, "healthCheckNodePort dropped",
                 [&] { svc.healthCheckNodePort = asIntIn(*h, sp / "healthCheckNodePort", 0, 65535); });
  svc.trafficDistribution = stringField(spec, "trafficDistribution", sp);

  if (const JV* status = field(obj, "status")) {
    Path stp = kRoot / "status";
    if (const JV* lb = field(asObject(*status, stp), "loadBalancer")) {
      Path lp = stp / "loadBalancer";
      if (const JV* ing = field(asObject(*lb, lp), "ingress")) {
        Path ip = lp / "ingress";
        const JV& arr = asArray(*ing, ip);
        for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
          optionalPart(warnings, "ingress entry dropped", [&] {
            const JV& o = asObject(arr[i], ip[i]);
            LoadBalancerIngress in;
            if (const JV* a = field(o, "ip")) in.ip = ipField(*a, ip[i] / "ip");
            in.hostname = stringField(o, "hostname", ip[i]);
            in.ipMode = stringField(o, "ipMode", ip[i]);
            // A hostname-only ingress (e.g. an AWS ELB) has no address a proxy can program.
            if (in.ip.empty())
              warnings.push_back((ip[i]).str() + " has no ip" +
                                 (in.hostname.empty() ? std::string() : " (only hostname " + quoted(in.hostname) + ")") +
                                 "; not programmed");
            svc.loadBalancerIngress.push_back(std::move(in));
          });
        }
      }
    }
  }
  return svc;
}

// ---- EndpointSlice ----

constexpr const char* kServiceNameLabel = "kubernetes.io/service-name";

std::vector<std::string> hintNames(const JV& hints, const char* key, const Path& hp) {
  std::vector<std::string> out;
  const JV* v = field(hints, key);
  if (!v) return out;
  Path p = hp / key;
  const JV& arr = asArray(*v, p);
  for (rapidjson::SizeType i = 0; i < arr.Size(); ++i)
    out.push_back(stringField(asObject(arr[i], p[i]), "name", p[i]));
  return out;
}

Endpoint decodeEndpoint(const JV& v, const Path& p, IPFamily family) {
  const JV& o = asObject(v, p);
  Endpoint ep;
  Path ap = p / "addresses";
  const JV* addrs = field(o, "addresses");
  if (!addrs || asArray(*addrs, ap).Empty()) fail(ap, "is empty");
  std::vector<std::string> more;  // after the first: rare
  for (rapidjson::SizeType i = 0; i < addrs->Size(); ++i) {
    IPFamily f;
    std::string ip = ipField((*addrs)[i], ap[i], &f);
    if (f != family)
      fail(ap[i], quoted(ip) + (family == IPFamily::V4 ? " is not IPv4" : " is not IPv6") + " as the addressType says");
    if (i == 0) ep.address = std::move(ip);
    else more.push_back(std::move(ip));
  }
  if (!more.empty()) {
    more.insert(more.begin(), ep.address);
    ep.setAddresses(std::move(more));
  }
  if (const JV* c = field(o, "conditions")) {
    Path cp = p / "conditions";
    const JV& co = asObject(*c, cp);
    if (const JV* b = field(co, "ready")) ep.conditions.ready = asBool(*b, cp / "ready");
    if (const JV* b = field(co, "serving")) ep.conditions.serving = asBool(*b, cp / "serving");
    if (const JV* b = field(co, "terminating")) ep.conditions.terminating = asBool(*b, cp / "terminating");
  }
  ep.nodeName = stringField(o, "nodeName", p);
  ep.zone = stringField(o, "zone", p);
  if (const JV* h = field(o, "hints")) {
    Path hp = p / "hints";
    const JV& ho = asObject(*h, hp);
    std::vector<std::string> zones = hintNames(ho, "forZones", hp);
    ep.setHints(std::move(zones), hintNames(ho, "forNodes", hp));
  }
  return ep;
}

EndpointSlice decodeSlice(const JV& obj, std::string* named, std::vector<std::string>& warnings) {
  EndpointSlice es;
  es.meta = decodeMeta(obj, true, NameRule::kDns1123Subdomain, named);
  // Read here rather than kept in meta.labels: serviceName is where it lives (encode puts it back).
  // decodeMeta has checked that every label is a string.
  const JV* labels = field(*field(obj, "metadata"), "labels");
  const JV* label = labels ? field(*labels, kServiceNameLabel) : nullptr;
  if (label) {
    es.serviceName = std::string(label->GetString(), label->GetStringLength());
    // The service name keys the slice to its Service (and so to chain names).
    if (!isDns1123Label(es.serviceName))
      throw Invalid(std::string("metadata.labels[\"") + kServiceNameLabel + "\"] " + quoted(es.serviceName) +
                    " is not a valid service name");
  }
  Path tp = kRoot / "addressType";
  const JV* at = field(obj, "addressType");
  if (!at) fail(tp, "is required");
  es.addressType = asString(*at, tp);
  if (es.addressType != "IPv4" && es.addressType != "IPv6" && es.addressType != "FQDN")
    fail(tp, quoted(es.addressType) + " is not IPv4, IPv6 or FQDN");

  if (const JV* ports = field(obj, "ports")) {
    Path pp = kRoot / "ports";
    const JV& arr = asArray(*ports, pp);
    std::set<std::string> names;
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
      const JV& o = asObject(arr[i], pp[i]);
      EndpointPort port;
      port.name = stringField(o, "name", pp[i]);
      if (!port.name.empty() && !isDns1123Label(port.name))
        fail(pp[i] / "name", quoted(port.name) + " is not a valid port name");
      if (!names.insert(port.name).second) fail(pp[i] / "name", quoted(port.name) + " is not unique");
      port.protocol = protocolField(o, pp[i]);
      // The API server does not range-check slice port numbers; upstream's proxy ignores a port
      // it cannot use (0 or out of range) and keeps the rest of the slice.
      if (const JV* n = field(o, "port")) {
        try {
          port.port = asIntIn(*n, pp[i] / "port", 1, 65535);
        } catch (const Invalid& e) {
          warnings.push_back(std::string(e.what()) + "; port dropped");
          continue;
        }
      }
      es.ports.push_back(std::move(port));
    }
  }

  // FQDN endpoints cannot be programmed into nftables: the slice is kept (it exists, and may
  // replace an IP slice of the same name) but contributes no endpoints.
  if (es.addressType == "FQDN") return es;
  IPFamily family = es.addressType == "IPv4" ? IPFamily::V4 : IPFamily::V6;
  if (const JV* eps = field(obj, "endpoints")) {
    Path ep = kRoot / "endpoints";
    const JV& arr = asArray(*eps, ep);
    es.endpoints.reserve(arr.Size());
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
      try {
        es.endpoints.push_back(decodeEndpoint(arr[i], ep[i], family));
      } catch (const Invalid& e) {
        warnings.push_back(std::string(e.what()) + "; endpoint dropped");
      }
    }
  }
  return es;
}

// ---- Node ----

Node decodeNode(const JV& obj, std::string* named, std::vector<std::string>& warnings) {
  Node node;
  node.meta = decodeMeta(obj, false, NameRule::kDns1123Subdomain, named);
  // /healthz reports a Node being deleted or drained by the autoscaler as not eligible.
  if (const JV* dt = field(asObject(*field(obj, "metadata"), kRoot / "metadata"), "deletionTimestamp"))
    if (!dt->IsNull()) node.deletionTimestamp = asString(*dt, kRoot / "metadata" / "deletionTimestamp");
  if (const JV* specV = field(obj, "spec")) {
    Path sp = kRoot / "spec";
    const JV& spec = asObject(*specV, sp);
    if (const JV* taints = field(spec, "taints")) {
      Path tp = sp / "taints";
      const JV& arr = asArray(*taints, tp);
      for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
        try {
          node.taintKeys.push_back(stringField(asObject(arr[i], tp[i]), "key", tp[i]));
        } catch (const Invalid& e) {
          warnings.push_back(std::string(e.what()) + "; taint dropped");
        }
      }
    }
    Path cp = sp / "podCIDRs";
    if (const JV* cidrs = field(spec, "podCIDRs")) {
      const JV& arr = asArray(*cidrs, cp);
      for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) node.podCIDRs.push_back(cidrField(arr[i], cp[i]));
    } else if (const JV* one = field(spec, "podCIDR")) {
      node.podCIDRs.push_back(cidrField(*one, sp / "podCIDR"));
    }
  }
  if (const JV* statusV = field(obj, "status")) {
    Path stp = kRoot / "status";
    if (const JV* addrs = field(asObject(*statusV, stp), "addresses")) {
      Path ap = stp / "addresses";
      const JV& arr = asArray(*addrs, ap);
      for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
        try {
          const JV& o = asObject(arr[i], ap[i]);
          std::string type = stringField(o, "type", ap[i]);
          const JV* a = field(o, "address");
          if (!a) fail(ap[i] / "address", "is required");
          // Hostname (and any future type) addresses are names, not IPs.
          std::string addr = (type == "InternalIP" || type == "ExternalIP") ? ipField(*a, ap[i] / "address")
                                                                            : asString(*a, ap[i] / "address");
          node.addresses.emplace_back(std::move(type), std::move(addr));
        } catch (const Invalid& e) {
          warnings.push_back(std::string(e.what()) + "; address dropped");
        }
      }
    }
  }
  return node;
}

// ---- ServiceCIDR ----

ServiceCIDR decodeServiceCIDR(const JV& obj, std::string* named, std::vector<std::string>& warnings) {
  ServiceCIDR sc;
  sc.meta = decodeMeta(obj, false, NameRule::kDns1123Subdomain, named);
  if (const JV* specV = field(obj, "spec")) {
    Path sp = kRoot / "spec";
    Path cp = sp / "cidrs";
    if (const JV* cidrs = field(asObject(*specV, sp), "cidrs")) {
      const JV& arr = asArray(*cidrs, cp);
      for (rapidjson::SizeType i = 0; i < arr.Size(); ++i)
        optionalPart(warnings, "CIDR dropped", [&] { sc.cidrs.push_back(cidrField(arr[i], cp[i])); });
    }
  }
  return sc;
}

// ---- dispatch ----

// "apiVersion" of an object, "" when absent.
std::string apiVersionOf(const JV& obj) {
  const JV* v = field(obj, "apiVersion");
  return v && v->IsString() ? v->GetString() : "";
}

// Best-effort "ns/name" for naming an object we will not decode; `namespaced` when the kind is
// known to be namespaced (the namespace then defaults to "default").
std::string nameForMessage(const JV& obj, bool namespaced = false) {
  const JV* m = field(obj, "metadata");
  if (!m || !m->IsObject()) return namespaced ? "default/<unnamed>" : "<unnamed>";
  const JV* ns = field(*m, "namespace");
  const JV* name = field(*m, "name");
  std::string s = ns && ns->IsString() ? printable(ns->GetString()) + "/" : namespaced ? "default/" : "";
  return s + (name && name->IsString() ? printable(name->GetString()) : "<unnamed>");
}

void decodeAny(const JV& v, const std::string& defaultKind, int depth, DecodedObjects& out) {
  if (v.IsNull()) return;  // an empty YAML document
  if (!v.IsObject()) {
    out.errors.push_back(std::string("document is ") + typeName(v) + ", not an object");
    return;
  }
  std::string kind = defaultKind;
  if (const JV* k = field(v, "kind")) {
    if (!k->IsString()) {
      out.errors.push_back("object " + nameForMessage(v) + ": kind must be a string");
      return;
    }
    kind = k->GetString();
  }
  if (kind.empty()) {
    out.errors.push_back("object " + nameForMessage(v) + ": kind is missing");
    return;
  }
  std::string apiVersion = apiVersionOf(v);

  // List, ServiceList, EndpointSliceList, NodeList ...: decode the items. A typed list's items
  // may omit their kind (the API server leaves it out); it is the list's kind minus "List".
  if (kind.size() >= 4 && kind.compare(kind.size() - 4, 4, "List") == 0) {
    if (depth > 2) {
      out.errors.push_back(kind + ": lists nested too deep");
      return;
    }
    const JV* items = field(v, "items");
    if (!items) return;
    if (!items->IsArray()) {
      out.errors.push_back(kind + ": items must be a list");
      return;
    }
    std::string itemKind = kind == "List" ? "" : kind.substr(0, kind.size() - 4);
    for (const JV& item : items->GetArray()) decodeAny(item, itemKind, depth + 1, out);
    return;
  }

  const char* wantVersion = kind == "EndpointSlice"                 ? "discovery.k8s.io/v1"
                            : (kind == "Service" || kind == "Node") ? "v1"
                            : kind == "ServiceCIDR"                 ? "networking.k8s.io/v1"
                                                                    : nullptr;
  if (!wantVersion) {
    out.errors.push_back("unknown kind " + printable(kind) + ": " + nameForMessage(v));
    return;
  }
  const bool clusterScoped = kind == "Node" || kind == "ServiceCIDR";
  // ServiceCIDR's beta spelling (Kubernetes 1.31-1.32) has the same fields.
  const bool betaCidr = kind == "ServiceCIDR" && apiVersion == "networking.k8s.io/v1beta1";
  if (!apiVersion.empty() && apiVersion != wantVersion && !betaCidr) {
    out.errors.push_back(kind + " " + nameForMessage(v, !clusterScoped) + ": apiVersion " + quoted(apiVersion) +
                         " is not supported (want " + wantVersion + ")");
    return;
  }
  std::string named;
  std::vector<std::string> warnings;
  try {
    if (kind == "Service") out.services.push_back(decodeService(v, &named, warnings));
    else if (kind == "EndpointSlice") out.slices.push_back(decodeSlice(v, &named, warnings));
    else if (kind == "ServiceCIDR") out.serviceCIDRs.push_back(decodeServiceCIDR(v, &named, warnings));
    else out.nodes.push_back(decodeNode(v, &named, warnings));
  } catch (const Invalid& e) {
    if (named.empty()) named = nameForMessage(v, !clusterScoped);
    out.errors.push_back(kind + " " + named + ": " + e.what());
    return;
  }
  for (auto& w : warnings) out.warnings.push_back(kind + " " + named + ": " + w);
}

bool isBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

void decodeObject(const rapidjson::Value& v, DecodedObjects& out) { decodeAny(v, "", 0, out); }

void decodeObjectAs(const rapidjson::Value& v, const std::string& kind, DecodedObjects& out) {
  decodeAny(v, kind, 3, out);  // deeper than any list may nest: an item is never a list itself
}

namespace {

bool jsonSyntaxError(const rapidjson::Document& doc, std::string* syntaxError) {
  if (!doc.HasParseError()) return false;
  if (syntaxError)
    *syntaxError = std::string("JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()) + " at offset " +
                   std::to_string(doc.GetErrorOffset());
  return true;
}

void appendDecoded(DecodedObjects& out, DecodedObjects& decoded) {
  auto append = [](auto& to, auto& from) {
    if (to.empty()) to = std::move(from);
    else to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  append(out.services, decoded.services);
  append(out.slices, decoded.slices);
  append(out.nodes, decoded.nodes);
  append(out.serviceCIDRs, decoded.serviceCIDRs);
  append(out.errors, decoded.errors);
  append(out.warnings, decoded.warnings);
}

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

}  // namespace

struct ParsedManifest::Documents {
  // Room for a JSON document's values, kept from parse to parse: a 3 MB file's tree is megabytes,
  // which, allocated afresh for each file, cost as much as parsing it. Grown to what the biggest
  // parse so far needed (more only spills into the allocator's own chunks).
  std::unique_ptr<char[]> space;
  size_t spaceSize = 0, needed = 0;
  std::optional<rapidjson::MemoryPoolAllocator<>> values;  // over `space`
  std::vector<rapidjson::Document> docs;                   // declared last: they go first

  void clear() {
    docs.clear();
    values.reset();
  }
};

ParsedManifest::ParsedManifest() = default;
ParsedManifest::~ParsedManifest() = default;
ParsedManifest::ParsedManifest(ParsedManifest&&) noexcept = default;
ParsedManifest& ParsedManifest::operator=(ParsedManifest&&) noexcept = default;

void ParsedManifest::clear() {
  if (docs_) docs_->clear();
}

bool parseManifestInPlace(char* text, size_t size, bool json, ParsedManifest& out, std::string* syntaxError) {
  if (!out.docs_) out.docs_ = std::make_unique<ParsedManifest::Documents>();
  ParsedManifest::Documents& d = *out.docs_;
  d.clear();
  // A UTF-8 byte order mark is legal at the start of either format; RapidJSON does not skip it.
  if (std::string_view(text, size).substr(0, 3) == kByteOrderMark) text += 3, size -= 3;
  if (isBlank(std::string_view(text, size))) return true;  // a file with no objects
  if (!json) {
    try {
      d.docs = yamlToJson(std::string_view(text, size));
    } catch (const std::exception& e) {
      if (syntaxError) *syntaxError = std::string("YAML: ") + e.what();
      return false;
    }
    return true;
  }
  if (d.needed > d.spaceSize) {
    d.space.reset();
    d.spaceSize = d.needed + d.needed / 4;
    d.space.reset(new char[d.spaceSize]);
  }
  if (d.space) d.values.emplace(d.space.get(), d.spaceSize);
  else d.values.emplace();
  // In situ: the document's strings are the text's own bytes (unescaped where they lie), not
  // copies. Parsing stops at a NUL byte just as a length-bounded parse does (RapidJSON reads the
  // end of its input as a NUL), so both accept and reject the same texts.
  text[size] = '\0';
  rapidjson::Document& doc = d.docs.emplace_back(&*d.values);
  // Iterative: a maliciously deep file must not overflow the daemon's stack.
  doc.ParseInsitu<rapidjson::kParseIterativeFlag>(text);
  d.needed = std::max(d.needed, d.values->Size() + 1024);  // + the chunk headers' share, roughly
  if (jsonSyntaxError(doc, syntaxError)) {
    d.clear();
    return false;
  }
  return true;
}

void decodeParsedManifest(const ParsedManifest& parsed, DecodedObjects& out) {
  if (!parsed.docs_) return;
  DecodedObjects decoded;
  for (const auto& d : parsed.docs_->docs) decodeObject(d, decoded);
  appendDecoded(out, decoded);
}

bool decodeManifest(std::string_view text, bool json, DecodedObjects& out, std::string* syntaxError) {
  std::string copy;  // the in-place parse overwrites its text, and needs one byte more
  copy.reserve(text.size() + 1);
  copy.append(text).push_back('\0');
  ParsedManifest parsed;
  if (!parseManifestInPlace(copy.data(), text.size(), json, parsed, syntaxError)) return false;
  decodeParsedManifest(parsed, out);
  return true;
}

}  // namespace kpn::api
