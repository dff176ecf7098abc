// Health-check node ports: for each externalTrafficPolicy=Local LoadBalancer Service, an HTTP
// server on its healthCheckNodePort that tells the cloud load balancer whether this node has a
// local ready endpoint (200) or not (503), as upstream's pkg/proxy/healthcheck/service_health.go.
// Any method and path gets the same answer.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pkg/health/health_check_index.h"
#include "pkg/http/server.h"

namespace kpn::health {

// What one port reports: the service and its local ready endpoints (terminating ones do not
// count); the same value the render side computes.
using ServiceHealthInfo = health::HealthCheckService;

// The proxy's own health as the health-check ports report it.
struct ProxyVerdict {
  bool healthy = true;
  std::string reason;  // when not healthy (ProxyHealthStatus::reason)
};

// The reply for one service: 200 when it has local endpoints and the proxy is healthy, else 503;
// the body is {"service":{"namespace":NS,"name":NAME},"localEndpoints":N,"serviceProxyHealthy":B},
// as upstream's, plus "reason" while the proxy is unhealthy: its rules here are stale, so the load
// balancer should not send traffic even to a ready local endpoint (beyond upstream, which answers
// the same 503 without saying why: kubernetes/kubernetes#115825).
http::Response serviceHealthResponse(const ServiceHealthInfo& svc, const ProxyVerdict& proxy);

// Told (on the HTTP loop's thread) when a service's port first fails to bind, and again when the
// error changes: upstream records a FailedToStartServiceHealthcheck event then.
using BindFailureHook = std::function<void(const std::string& ns, const std::string& name, int port,
                                           const std::string& error)>;

class ServiceHealthServers {
 public:
  // `bindAddresses`: IP literals to listen on (the NodePort addresses); empty listens on every
  // address of both families. A port that cannot be bound on some address is logged and tried
  // again every `retryInterval` until it binds or leaves the set.
  ServiceHealthServers(http::Loop& loop, std::vector<std::string> bindAddresses,
                       std::chrono::milliseconds retryInterval = std::chrono::seconds(5),
                       BindFailureHook onBindFailure = nullptr);
  ~ServiceHealthServers();  // closes every port
  ServiceHealthServers(const ServiceHealthServers&) = delete;
  ServiceHealthServers& operator=(const ServiceHealthServers&) = delete;

  // Makes `services`, keyed by healthCheckNodePort, the whole set: ports not in it close (with
  // their open connections), new ports open, kept ports answer with the new counts. Requests see
  // either the previous set or this one, never a mix. Ports outside 1..65535 are logged and
  // skipped. Call it from any thread but the loop's.
  void update(std::map<int, ServiceHealthInfo> services);
  // Healthy until told otherwise (upstream: healthy during start-up). Any thread.
  void setProxyHealth(ProxyVerdict v) {
    std::lock_guard<std::mutex> g(proxyMu_);
    proxy_ = std::move(v);
  }

  std::vector<int> listeningPorts() const;        // ports bound on every bind address, ascending
  std::map<int, std::string> bindErrors() const;  // the others: port -> the last bind error

 private:
  struct Port {
    ServiceHealthInfo info;
    std::vector<std::unique_ptr<http::Server>> servers;  // one per bind address; null = not bound
    std::string lastError;
    int failures = 0;
  };
  void bindMissing(int port, Port& p);  // on the loop thread
  http::Response handle(int port) const;  // on the loop thread

  http::Loop& loop_;
  std::vector<std::string> addresses_;  // {""} for every address
  std::chrono::milliseconds retryInterval_;
  BindFailureHook onBindFailure_;
  mutable std::mutex proxyMu_;  // the sync loop's thread writes, the HTTP loop's reads
  ProxyVerdict proxy_;
  std::map<int, Port> ports_;  // touched only on the loop thread: requests and changes never interleave
  std::unique_ptr<http::Ticker> retry_;
};

}  // namespace kpn::health
