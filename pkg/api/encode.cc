#include "pkg/api/encode.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace kpn::api {

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void str(Writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

void strings(Writer& w, const char* key, const std::vector<std::string>& v) {
  w.Key(key);
  w.StartArray();
  for (const auto& s : v) w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  w.EndArray();
}

void stringMap(Writer& w, const char* key, const std::map<std::string, std::string>& m) {
  w.Key(key);
  w.StartObject();
  for (const auto& [k, v] : m) str(w, k.c_str(), v);
  w.EndObject();
}

void meta(Writer& w, const ObjectMeta& m, bool namespaced) {
  w.Key("metadata");
  w.StartObject();
  str(w, "name", m.name);
  if (namespaced) str(w, "namespace", m.ns);
  if (!m.labels.empty()) stringMap(w, "labels", m.labels);
  if (!m.annotations.empty()) stringMap(w, "annotations", m.annotations);
  if (!m.creationTimestamp.empty()) str(w, "creationTimestamp", m.creationTimestamp);
  if (!m.resourceVersion.empty()) str(w, "resourceVersion", m.resourceVersion);
}

void head(Writer& w, const char* apiVersion, const char* kind) {
  w.StartObject();
  str(w, "apiVersion", apiVersion);
  str(w, "kind", kind);
}

std::string done(rapidjson::StringBuffer& b) { return std::string(b.GetString(), b.GetSize()); }

}  // namespace

std::string encodeService(const Service& s) {
  rapidjson::StringBuffer b;
  Writer w(b);
  head(w, "v1", "Service");
  meta(w, s.meta, true);
  w.EndObject();
  w.Key("spec");
  w.StartObject();
  str(w, "type", s.type);
  if (!s.externalName.empty()) str(w, "externalName", s.externalName);
  if (s.headless) strings(w, "clusterIPs", {"None"});
  else if (!s.clusterIPs.empty()) strings(w, "clusterIPs", s.clusterIPs);
  w.Key("ports");
  w.StartArray();
  for (const auto& p : s.ports) {
    w.StartObject();
    if (!p.name.empty()) str(w, "name", p.name);
    str(w, "protocol", p.protocol == Protocol::TCP ? "TCP" : p.protocol == Protocol::UDP ? "UDP" : "SCTP");
    w.Key("port");
    w.Int(p.port);
    if (p.nodePort) {
      w.Key("nodePort");
      w.Int(p.nodePort);
    }
    if (!p.targetPort.empty()) {
      w.Key("targetPort");
      if (p.targetPort.find_first_not_of("0123456789") == std::string::npos) w.Int(std::stoi(p.targetPort));
      else w.String(p.targetPort.c_str());
    }
    w.EndObject();
  }
  w.EndArray();
  if (!s.externalIPs.empty()) strings(w, "externalIPs", s.externalIPs);
  std::vector<std::string> ranges = s.loadBalancerSourceRanges;
  // An unreadable entry made the firewall admit nothing: one that cannot parse keeps that.
  if (s.sourceRangeUnreadable) ranges.push_back("unreadable");
  if (!ranges.empty()) strings(w, "loadBalancerSourceRanges", ranges);
  str(w, "externalTrafficPolicy", s.externalTrafficPolicy);
  str(w, "internalTrafficPolicy", s.internalTrafficPolicy);
  str(w, "sessionAffinity", s.sessionAffinity);
  if (s.sessionAffinity == "ClientIP") {
    w.Key("sessionAffinityConfig");
    w.StartObject();
    w.Key("clientIP");
    w.StartObject();
    w.Key("timeoutSeconds");
    w.Int(s.sessionAffinityTimeoutSeconds);
    w.EndObject();
    w.EndObject();
  }
  if (s.healthCheckNodePort) {
    w.Key("healthCheckNodePort");
    w.Int(s.healthCheckNodePort);
  }
  if (!s.trafficDistribution.empty()) str(w, "trafficDistribution", s.trafficDistribution);
  w.EndObject();
  w.Key("status");
  w.StartObject();
  w.Key("loadBalancer");
  w.StartObject();
  if (!s.loadBalancerIngress.empty()) {
    w.Key("ingress");
    w.StartArray();
    for (const auto& in : s.loadBalancerIngress) {
      w.StartObject();
      if (!in.ip.empty()) str(w, "ip", in.ip);
      if (!in.hostname.empty()) str(w, "hostname", in.hostname);
      if (!in.ipMode.empty()) str(w, "ipMode", in.ipMode);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return done(b);
}

std::string encodeEndpointSlice(const EndpointSlice& s) {
  rapidjson::StringBuffer b;
  Writer w(b);
  head(w, "discovery.k8s.io/v1", "EndpointSlice");
  ObjectMeta m = s.meta;
  if (!s.serviceName.empty()) m.labels["kubernetes.io/service-name"] = s.serviceName;
  meta(w, m, true);
  w.EndObject();
  str(w, "addressType", s.addressType);
  w.Key("ports");
  w.StartArray();
  for (const auto& p : s.ports) {
    w.StartObject();
    str(w, "name", p.name);
    str(w, "protocol", p.protocol == Protocol::TCP ? "TCP" : p.protocol == Protocol::UDP ? "UDP" : "SCTP");
    if (p.port) {
      w.Key("port");
      w.Int(*p.port);
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("endpoints");
  w.StartArray();
  for (const auto& e : s.endpoints) {
    w.StartObject();
    strings(w, "addresses", e.addresses());
    w.Key("conditions");
    w.StartObject();
    auto cond = [&](const char* k, const std::optional<bool>& v) {
      if (!v) return;
      w.Key(k);
      w.Bool(*v);
    };
    cond("ready", e.conditions.ready);
    cond("serving", e.conditions.serving);
    cond("terminating", e.conditions.terminating);
    w.EndObject();
    if (!e.nodeName.empty()) str(w, "nodeName", e.nodeName);
    if (!e.zone.empty()) str(w, "zone", e.zone);
    if (!e.hintZones().empty() || !e.hintNodes().empty()) {
      w.Key("hints");
      w.StartObject();
      auto names = [&](const char* k, const std::vector<std::string>& v) {
        if (v.empty()) return;
        w.Key(k);
        w.StartArray();
        for (const auto& n : v) {
          w.StartObject();
          str(w, "name", n);
          w.EndObject();
        }
        w.EndArray();
      };
      names("forZones", e.hintZones());
      names("forNodes", e.hintNodes());
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return done(b);
}

std::string encodeNode(const Node& n) {
  rapidjson::StringBuffer b;
  Writer w(b);
  head(w, "v1", "Node");
  meta(w, n.meta, false);
  if (!n.deletionTimestamp.empty()) str(w, "deletionTimestamp", n.deletionTimestamp);
  w.EndObject();
  w.Key("spec");
  w.StartObject();
  strings(w, "podCIDRs", n.podCIDRs);
  if (!n.taintKeys.empty()) {
    w.Key("taints");
    w.StartArray();
    for (const auto& k : n.taintKeys) {
      w.StartObject();
      str(w, "key", k);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  w.Key("status");
  w.StartObject();
  w.Key("addresses");
  w.StartArray();
  for (const auto& [type, address] : n.addresses) {
    w.StartObject();
    str(w, "type", type);
    str(w, "address", address);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return done(b);
}

std::string encodeServiceCIDR(const ServiceCIDR& c) {
  rapidjson::StringBuffer b;
  Writer w(b);
  head(w, "networking.k8s.io/v1", "ServiceCIDR");
  meta(w, c.meta, false);
  w.EndObject();
  w.Key("spec");
  w.StartObject();
  strings(w, "cidrs", c.cidrs);
  w.EndObject();
  w.EndObject();
  return done(b);
}

}  // namespace kpn::api
