#include "pkg/events/event.h"

#include <cstdio>
#include <ctime>
#include <tuple>

#include "nft/json_text.h"

namespace kpn::events {

using nft::jsonString;

bool ObjectRef::operator<(const ObjectRef& o) const {
  return std::tie(apiVersion, kind, ns, name, uid) < std::tie(o.apiVersion, o.kind, o.ns, o.name, o.uid);
}
bool ObjectRef::operator==(const ObjectRef& o) const {
  return std::tie(apiVersion, kind, ns, name, uid) == std::tie(o.apiVersion, o.kind, o.ns, o.name, o.uid);
}

ObjectRef nodeRef(const std::string& nodeName) { return {"", "Node", "", nodeName, nodeName}; }
ObjectRef serviceRef(const std::string& ns, const std::string& name) { return {"v1", "Service", ns, name, ""}; }

Reporter reporterFor(const std::string& hostname) {
  Reporter r;
  r.instance = clip(r.controller + "-" + hostname, 128);
  return r;
}

namespace {

std::pair<std::string, std::string> splitService(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"default", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

}  // namespace

Event startingEvent(const std::string& nodeName) { return {"Normal", "Starting", "StartKubeProxy", "", nodeRef(nodeName)}; }

Event serverFailedEvent(const std::string& nodeName, const std::string& what, const std::string& error) {
  return {"Warning", what == "healthz" ? "FailedToStartProxierHealthcheck" : "FailedToStartMetricServer",
          "StartKubeProxy", error, nodeRef(nodeName)};
}

Event healthCheckFailedEvent(const std::string& nodeName, const std::string& ns, const std::string& name, int port,
                             const std::string& error) {
  return {"Warning", "FailedToStartServiceHealthcheck", "Listen",
          "node " + nodeName + " failed to start healthcheck \"" + ns + "/" + name + "\" on port " +
              std::to_string(port) + ": " + error,
          serviceRef(ns, name)};
}

Event serviceRefusedEvent(const std::string& nodeName, const std::string& service, const std::string& error) {
  auto [ns, name] = splitService(service);
  return {"Warning", "FailedToProgramService", "SyncProxyRules",
          "node " + nodeName + ": nftables refuses the rules of this Service (" + error +
              "); they are left out and retried, every other Service is programmed",
          serviceRef(ns, name)};
}

Event serviceProgrammedEvent(const std::string& nodeName, const std::string& service) {
  auto [ns, name] = splitService(service);
  return {"Normal", "ServiceProgrammed", "SyncProxyRules",
          "node " + nodeName + ": the rules of this Service are programmed again", serviceRef(ns, name)};
}

std::string eventNamespace(const ObjectRef& r) { return r.ns.empty() ? "default" : r.ns; }

std::string eventName(const ObjectRef& r, WallTime t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(ns));
  return r.name + "." + hex;
}

std::string eventsPath(const std::string& ns) { return "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"; }

std::string microTime(WallTime t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1000000));
  return buf;
}

std::string clip(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t cut = limit - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return text.substr(0, cut) + "...";
}

namespace {

std::string refJson(const ObjectRef& r) {
  std::string out = "{";
  auto field = [&](const char* k, const std::string& v) {
    if (v.empty()) return;
    if (out.size() > 1) out += ",";
    out += std::string("\"") + k + "\":" + jsonString(v);
  };
  field("apiVersion", r.apiVersion);
  field("kind", r.kind);
  field("namespace", r.ns);
  field("name", r.name);
  field("uid", r.uid);
  return out + "}";
}

std::string seriesJson(int count, WallTime lastObserved) {
  return "{\"count\":" + std::to_string(count) + ",\"lastObservedTime\":" + jsonString(microTime(lastObserved)) + "}";
}

}  // namespace

std::string createBody(const Event& e, const Reporter& by, const std::string& name, WallTime eventTime,
                       int seriesCount, WallTime lastObserved) {
  std::string out = "{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"metadata\":{\"name\":" + jsonString(name) +
                    ",\"namespace\":" + jsonString(eventNamespace(e.regarding)) + "},\"eventTime\":" +
                    jsonString(microTime(eventTime)) + ",\"reportingController\":" + jsonString(by.controller) +
                    ",\"reportingInstance\":" + jsonString(by.instance) + ",\"action\":" + jsonString(clip(e.action, 128)) +
                    ",\"reason\":" + jsonString(clip(e.reason, 128)) + ",\"regarding\":" + refJson(e.regarding) +
                    ",\"note\":" + jsonString(clip(e.note, 1024)) + ",\"type\":" + jsonString(e.type);
  if (seriesCount >= 2) out += ",\"series\":" + seriesJson(seriesCount, lastObserved);
  return out + "}";
}

std::string seriesPatch(int count, WallTime lastObserved) { return "{\"series\":" + seriesJson(count, lastObserved) + "}"; }

}  // namespace kpn::events
