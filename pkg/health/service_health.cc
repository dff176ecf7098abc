#include "pkg/health/service_health.h"

#include <glog/logging.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace kpn::health {

http::Response serviceHealthResponse(const ServiceHealthInfo& svc, const ProxyVerdict& proxy) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("service");
  w.StartObject();
  w.Key("namespace");
  w.String(svc.ns.c_str(), static_cast<rapidjson::SizeType>(svc.ns.size()));
  w.Key("name");
  w.String(svc.name.c_str(), static_cast<rapidjson::SizeType>(svc.name.size()));
  w.EndObject();
  w.Key("localEndpoints");
  w.Int(svc.localEndpoints);
  w.Key("serviceProxyHealthy");
  w.Bool(proxy.healthy);
  if (!proxy.healthy) {
    w.Key("reason");
    std::string why = "kube-proxy is unhealthy: " + proxy.reason;
    w.String(why.c_str(), static_cast<rapidjson::SizeType>(why.size()));
  }
  w.EndObject();

  http::Response r;
  r.status = svc.localEndpoints > 0 && proxy.healthy ? 200 : 503;
  r.headers = {{"Content-Type", "application/json"},
               {"X-Content-Type-Options", "nosniff"},
               // Newer upstream sends it: load balancers that weigh nodes (GCE) read it.
               {"X-Load-Balancing-Endpoint-Weight", std::to_string(svc.localEndpoints)}};
  r.body.assign(buf.GetString(), buf.GetSize());
  return r;
}

ServiceHealthServers::ServiceHealthServers(http::Loop& loop, std::vector<std::string> bindAddresses,
                                           std::chrono::milliseconds retryInterval, BindFailureHook onBindFailure)
    : loop_(loop), addresses_(std::move(bindAddresses)), retryInterval_(retryInterval),
      onBindFailure_(std::move(onBindFailure)) {
  if (addresses_.empty()) addresses_.push_back("");
  retry_ = std::make_unique<http::Ticker>(loop_, retryInterval, [this] {
    for (auto& [port, p] : ports_)
      if (p.failures > 0) bindMissing(port, p);
  });
}

ServiceHealthServers::~ServiceHealthServers() {
  retry_.reset();
  loop_.call([this] { ports_.clear(); });
}

void ServiceHealthServers::update(std::map<int, ServiceHealthInfo> services) {
  loop_.call([&] {
    for (auto it = ports_.begin(); it != ports_.end();) {
      if (services.count(it->first)) {
        ++it;
        continue;
      }
      VLOG(2) << "closing health check port " << it->first << " of " << it->second.info.ns << "/"
              << it->second.info.name;
      it = ports_.erase(it);  // closes its servers and their connections
    }
    for (auto& [port, info] : services) {
      if (port < 1 || port > 65535) {
        LOG(WARNING) << "health check port " << port << " of " << info.ns << "/" << info.name
                     << " is out of range; not served";
        continue;
      }
      auto it = ports_.find(port);
      if (it != ports_.end()) {
        it->second.info = std::move(info);
        continue;
      }
      Port& p = ports_[port];
      p.info = std::move(info);
      p.servers.resize(addresses_.size());
      VLOG(2) << "opening health check port " << port << " for " << p.info.ns << "/" << p.info.name;
      bindMissing(port, p);
    }
  });
}

void ServiceHealthServers::bindMissing(int port, Port& p) {
  bool allBound = true;
  for (size_t i = 0; i < addresses_.size(); ++i) {
    if (p.servers[i]) continue;
    std::string error;
    p.servers[i] = http::Server::listen(loop_, addresses_[i], port, [this, port](const http::Request&) {
      return handle(port);
    }, &error);
    if (p.servers[i]) continue;
    allBound = false;
    // Loud once, then quiet: a port held by another program would otherwise log every retry.
    if (p.failures == 0 || error != p.lastError) {
      LOG(WARNING) << "health check of " << p.info.ns << "/" << p.info.name << ": " << error
                   << "; retrying every " << retryInterval_.count() << " ms";
      if (onBindFailure_) onBindFailure_(p.info.ns, p.info.name, port, error);
    } else
      VLOG(2) << "health check of " << p.info.ns << "/" << p.info.name << ": still " << error;
    p.lastError = error;
  }
  if (allBound) {
    if (p.failures > 0)
      LOG(INFO) << "health check of " << p.info.ns << "/" << p.info.name << " listens on port " << port
                << " after " << p.failures << " failed attempts";
    p.failures = 0;
    p.lastError.clear();
  } else {
    ++p.failures;
  }
}

http::Response ServiceHealthServers::handle(int port) const {
  auto it = ports_.find(port);
  // Unreachable: a port leaves ports_ together with its servers, on this thread.
  if (it == ports_.end()) return http::Response{503, {}, ""};
  ProxyVerdict proxy;
  {
    std::lock_guard<std::mutex> g(proxyMu_);
    proxy = proxy_;
  }
  return serviceHealthResponse(it->second.info, proxy);
}

std::vector<int> ServiceHealthServers::listeningPorts() const {
  std::vector<int> out;
  loop_.call([&] {
    for (const auto& [port, p] : ports_)
      if (p.failures == 0) out.push_back(port);
  });
  return out;
}

std::map<int, std::string> ServiceHealthServers::bindErrors() const {
  std::map<int, std::string> out;
  loop_.call([&] {
    for (const auto& [port, p] : ports_)
      if (p.failures > 0) out[port] = p.lastError;
  });
  return out;
}

}  // namespace kpn::health
