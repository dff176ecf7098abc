#include "pkg/localhost/sync_follower.h"

#include <glog/logging.h>

namespace kpn::localhost {

void SyncFollower::synced(const sync::SyncReport& r) {
  if (!r.stats.ok) return;
  const services::Environment& env = renderer_.environment();
  const std::string zones = env.family[0].zone + "/" + env.family[1].zone;
  const bool changed = !r.changed || !r.changed->empty();
  if (synced_ && !changed && !retry_ && zones == zones_) return;
  synced_ = true, retry_ = false, zones_ = zones;
  for (nft::Family f : served_()) {
    const net::Family nf = f == nft::Family::IPv4 ? net::Family::V4 : net::Family::V6;
    if (!cfg_.localhostNodePorts(nf)) continue;
    SyncResult result = proxy_.sync(nf, render::localhostNodePorts(state_, cfg_, nf, env.of(f).zone));
    for (const auto& [port, why] : result.failed)
      LOG(ERROR) << "localhost nodePort " << port << ": cannot listen on " << render::loopbackAddress(nf) << ":" << port
                 << ": " << why << " (another process holds it?); trying again at the next sync";
    retry_ = retry_ || !result.failed.empty();
    metrics_.setListeners(f, result.listeners);
    metrics_.countCreationFailures(f, result.failed.size());
  }
}

}  // namespace kpn::localhost
