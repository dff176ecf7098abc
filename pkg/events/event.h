// A Kubernetes Event as upstream kube-proxy records it: events.k8s.io/v1 through client-go's
// tools/events, reportingController "kube-proxy", reportingInstance "kube-proxy-<hostname>".
// Value types and the request bodies only; sending is recorder.h's.
#pragma once

#include <chrono>
#include <string>

namespace kpn::events {

using WallTime = std::chrono::system_clock::time_point;

// The object an event is about (`regarding`), as an ObjectReference.
struct ObjectRef {
  std::string apiVersion, kind, ns, name, uid;
  bool operator<(const ObjectRef& o) const;
  bool operator==(const ObjectRef& o) const;
};

// Upstream's reference to its Node: kind Node, the node's name, and the name as its UID
// (cmd/kube-proxy/app/server.go builds it that way instead of reading the Node).
ObjectRef nodeRef(const std::string& nodeName);
// A Service (apiVersion v1, kind Service), as upstream's health-check server names it.
ObjectRef serviceRef(const std::string& ns, const std::string& name);

struct Event {
  std::string type;  // "Normal" | "Warning"
  std::string reason;
  std::string action;
  std::string note;
  ObjectRef regarding;
};

struct Reporter {
  std::string controller = "kube-proxy";
  std::string instance;  // "kube-proxy-<hostname>"
};
Reporter reporterFor(const std::string& hostname);

// Upstream's events and their reasons (cmd/kube-proxy/app/server.go), and ours about Services.
Event startingEvent(const std::string& nodeName);  // Normal Starting, action StartKubeProxy
// Warning FailedToStartProxierHealthcheck (what == "healthz") or FailedToStartMetricServer.
Event serverFailedEvent(const std::string& nodeName, const std::string& what, const std::string& error);
// Warning FailedToStartServiceHealthcheck, action Listen: a health-check node port that cannot
// be opened (upstream's pkg/proxy/healthcheck).
Event healthCheckFailedEvent(const std::string& nodeName, const std::string& ns, const std::string& name, int port,
                             const std::string& error);
// Ours: Warning FailedToProgramService when the kernel refuses a Service's rules (they are left
// out; everything else is programmed), Normal ServiceProgrammed when they are programmed again.
Event serviceRefusedEvent(const std::string& nodeName, const std::string& service, const std::string& error);
Event serviceProgrammedEvent(const std::string& nodeName, const std::string& service);

// Where an event about `r` lives: the object's namespace, "default" for a cluster-scoped one
// (client-go's makeEvent).
std::string eventNamespace(const ObjectRef& r);
// "<regarding name>.<event time in nanoseconds, hex>", as client-go names events.
std::string eventName(const ObjectRef& r, WallTime t);
std::string eventsPath(const std::string& ns);  // the collection: /apis/events.k8s.io/v1/namespaces/NS/events
// metav1.MicroTime: "2006-01-02T15:04:05.000000Z".
std::string microTime(WallTime t);

// POST body of a new event. `seriesCount` >= 2 adds the series (a series that is created because
// its patch found no event: client-go's fallback).
std::string createBody(const Event& e, const Reporter& by, const std::string& name, WallTime eventTime,
                       int seriesCount = 0, WallTime lastObserved = {});
// The strategic merge patch of a series: {"series":{"count":N,"lastObservedTime":T}}.
std::string seriesPatch(int count, WallTime lastObserved);
inline constexpr const char* kStrategicMergePatch = "application/strategic-merge-patch+json";

// The API server's limits (pkg/apis/core/validation/events.go): note at most 1024 bytes, reason
// and action 128; longer text is cut at a UTF-8 boundary with "...".
std::string clip(const std::string& text, size_t limit);

}  // namespace kpn::events
