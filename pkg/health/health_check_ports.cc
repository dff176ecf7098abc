#include "pkg/health/health_check_ports.h"

#include <glog/logging.h>

namespace kpn::health {

std::vector<std::string> healthCheckBindAddresses(const services::Environment& env) {
  std::vector<std::string> out;
  for (const auto& f : env.family) {
    if (f.nodePortMatchAll) return {};
    out.insert(out.end(), f.nodePortIPs.begin(), f.nodePortIPs.end());
  }
  return out;
}

void HealthCheckPorts::update(const state::ClusterState& st, const services::NodeConfig& cfg,
                              const std::set<std::string>* changed, const services::Environment& env) {
  bool portsChanged = index_.update(st, cfg, changed);
  if (!servers_ && index_.ports().empty()) return;  // no thread work and no sockets until a service needs them
  std::vector<std::string> addresses = healthCheckBindAddresses(env);
  if (servers_ && !portsChanged && addresses == addresses_) return;
  if (!servers_ || addresses != addresses_) {
    if (servers_)
      LOG(INFO) << "health-check node ports move to " << (addresses.empty() ? std::string("every address") : [&] {
        std::string s;
        for (const auto& a : addresses) s += (s.empty() ? "" : ", ") + a;
        return s;
      }());
    servers_.reset();  // closes the old listeners before binding the same ports elsewhere
    servers_ = std::make_unique<ServiceHealthServers>(loop_, addresses, std::chrono::seconds(5), onBindFailure_);
    servers_->setProxyHealth(proxy_);
    addresses_ = std::move(addresses);
  }
  servers_->update(index_.ports());
}

void HealthCheckPorts::setProxyHealth(ProxyVerdict v) {
  if (servers_) servers_->setProxyHealth(v);
  proxy_ = std::move(v);
}

}  // namespace kpn::health
