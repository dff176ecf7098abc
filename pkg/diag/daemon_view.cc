#include "pkg/diag/daemon_view.h"

#include <unistd.h>

#include <ctime>
#include <set>

#include "nft/model.h"
#include "pkg/api/encode.h"
#include "pkg/render/service_part.h"
#include "pkg/services/proxied.h"

namespace kpn::diag {

namespace {

std::string rfc3339(sync::WallTime t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double secondsSince(sync::WallTime t) {
  return std::chrono::duration<double>(std::chrono::system_clock::now() - t).count();
}

const char* planName(sync::SyncStats::Plan p) {
  switch (p) {
    case sync::SyncStats::Plan::Incremental: return "incremental";
    case sync::SyncStats::Plan::Reconcile: return "reconcile";
    case sync::SyncStats::Plan::Full: return "full";
    default: return "none";
  }
}

// Every address a Service answers on with one of its ports, as "ip" and the nodePorts.
std::set<std::string> frontendIps(const api::Service& s) {
  std::set<std::string> out(s.clusterIPs.begin(), s.clusterIPs.end());
  out.insert(s.externalIPs.begin(), s.externalIPs.end());
  for (const auto& in : s.loadBalancerIngress)
    if (!in.ip.empty()) out.insert(in.ip);
  return out;
}

bool sharesFrontend(const api::Service& a, const api::Service& b) {
  std::set<std::string> ips = frontendIps(a);
  for (const auto& ip : frontendIps(b))
    if (ips.count(ip)) return true;
  for (const auto& pa : a.ports)
    for (const auto& pb : b.ports)
      if (pa.nodePort && pa.nodePort == pb.nodePort && pa.protocol == pb.protocol) return true;
  return false;
}

}  // namespace

DaemonStatus DaemonView::status() const {
  DaemonStatus s;
  s.version = id_.version;
  s.commit = id_.commit;
  s.pid = getpid();
  s.startedAt = rfc3339(id_.startedAt);
  s.uptimeSeconds = secondsSince(id_.startedAt);
  s.node = id_.node;
  s.source.kind = id_.sourceKind;
  s.source.describe = source_.describe();
  s.source.synced = source_.hasSynced();
  s.source.pending = source_.pending();
  for (const auto& r : source_.resourceStates()) {
    s.source.resources.push_back({r.name, r.listed, r.lastError});
    if (!r.lastError.empty()) s.source.connected = false;
  }
  s.syncs = record_.syncs();
  s.consecutiveFailures = record_.consecutiveFailures();
  if (const auto& ok = record_.lastSuccess())
    s.lastSuccess = SyncSuccess{rfc3339(ok->at), secondsSince(ok->at), planName(ok->plan), ok->ops, ok->durationMs};
  if (const auto& bad = record_.lastFailure())
    s.lastFailure = SyncFailure{rfc3339(bad->at), secondsSince(bad->at), bad->error};
  std::set<std::string> refused = syncer_.rejectedServices();
  s.servicesKnown = state_.services.size();
  for (const auto& [key, svc] : state_.services)
    if (services::serviceIsProxied(*svc, renderer_.config()) && !svc->clusterIPs.empty() && !refused.count(key))
      ++s.servicesProgrammed;
  for (const auto& key : refused) {
    RefusedService r{key, "", ""};
    auto it = record_.refusals().find(key);
    if (it != record_.refusals().end()) {
      r.error = it->second.error;
      r.since = rfc3339(it->second.since);
    }
    s.refused.push_back(std::move(r));
  }
  for (nft::Family f : syncer_.families()) s.families.push_back(nft::familyName(f));
  s.repairs = record_.repairs();
  if (record_.lastRepair()) s.lastRepairAt = rfc3339(*record_.lastRepair());
  if (events_) s.events = events_();
  return s;
}

DaemonView::StateParts DaemonView::stateParts(const StateQuery& q) const {
  StateParts out;
  std::set<std::string> keys;
  if (q.kind == StateQuery::Kind::Service) {
    auto it = state_.services.find(state::serviceKey(q.ns, q.name));
    if (it != state_.services.end()) {
      out.serviceFound = true;
      keys.insert(it->first);
      // Services contesting one of its addresses decide who holds it (services/claims.h).
      for (const auto& [key, svc] : state_.services)
        if (key != it->first && sharesFrontend(*it->second, *svc)) keys.insert(key);
    }
  } else if (q.kind == StateQuery::Kind::Address) {
    api::Protocol proto = q.protocol == "udp" ? api::Protocol::UDP : q.protocol == "sctp" ? api::Protocol::SCTP
                                                                                          : api::Protocol::TCP;
    for (const auto& [key, svc] : state_.services) {
      bool match = frontendIps(*svc).count(q.ip) != 0;
      for (const auto& p : svc->ports) match = match || (q.port && p.nodePort == q.port && p.protocol == proto);
      if (match) keys.insert(key);
    }
  }
  for (const auto& key : keys) {
    out.objects.push_back(api::encodeService(*state_.services.at(key)));
    auto slices = state_.slicesByService.find(key);
    if (slices != state_.slicesByService.end())
      for (const auto& [name, slice] : slices->second) out.objects.push_back(api::encodeEndpointSlice(*slice));
  }
  if (state_.node) out.objects.push_back(api::encodeNode(*state_.node));
  for (const auto& [name, cidr] : state_.serviceCIDRs) out.objects.push_back(api::encodeServiceCIDR(*cidr));
  out.statusJson = statusJson(status());
  return out;
}

ExcludedLookupJson DaemonView::lookupExcluded(const std::string& ns, const std::string& name) const {
  source::ExcludedLookup l = source_.lookupExcluded(ns, name);
  ExcludedLookupJson out;
  if (!l.asked) out.error = l.error;
  if (l.service) out.json = api::encodeService(*l.service);
  return out;
}

}  // namespace kpn::diag
