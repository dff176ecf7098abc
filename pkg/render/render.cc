#include "pkg/render/render.h"

#include <glog/logging.h>

#include <exception>
#include <thread>

#include "pkg/render/affinity.h"
#include "pkg/render/layout.h"
#include "pkg/render/localhost_nodeports.h"
#include "pkg/render/slot_adoption.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/proxied.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

const Family kFamilies[] = {Family::IPv4, Family::IPv6};

std::string ownerOf(const std::string& serviceKey) { return "svc " + serviceKey; }
const char* kBaseOwner = "base";
const char* kPicksOwner = "picks";  // the shared pick chains for the endpoint counts in use

// The entry chain of every key space (the base `services` chain jumps to all four), each pool's
// search chains, and the chains of the picks that are not counted.
PartPtr picksPart(Family f, const PickLayout& layout) {
  auto part = std::make_shared<Part>();
  for (KeySpace space : kSpaces) part->chains.push_back(entryChain(f, space, layout.pools));
  for (const Pool& pool : layout.pools)
    for (Chain& c : protocolPickChains(f, pool)) part->chains.push_back(std::move(c));
  for (const Pick& pick : layout.chains) part->chains.push_back(pickChain(f, pick));
  nft::shrinkToFit(*part);
  return part;
}

}  // namespace

void Renderer::usePicks(size_t family, const std::string& key, std::vector<Pick> picks) {
  auto& byService = picksByService_[family];
  auto& users = pickUsers_[family];
  auto old = byService.find(key);
  if (old != byService.end()) {
    if (old->second == picks) return;
    for (const Pick& p : old->second) {
      auto u = users.find(p);
      if (--u->second == 0) users.erase(u);
    }
    byService.erase(old);
  }
  for (const Pick& p : picks) ++users[p];
  if (!picks.empty()) byService.emplace(key, std::move(picks));
}

Renderer::Renderer(services::NodeConfig cfg) : cfg_(std::move(cfg)) {
  const unsigned cpus = std::thread::hardware_concurrency();  // may say 0
  threads_ = cpus >= 2 ? 2 : 1;
}

Ruleset Renderer::skeleton() const {
  Ruleset rs;
  for (Family f : kFamilies) rs.tables.push_back(Table{f, kTableName, tableDeclarations(f, cfg_), localhostCounters(f, cfg_), {}});
  return rs;
}

const Ruleset& Renderer::render(const state::ClusterState& st, const std::set<std::string>* changed) {
  services::Environment env = services::deriveEnvironment(cfg_, st.node.get(), st.serviceCIDRs, host_);
  const bool envChanged = !haveEnv_ || !(env == env_);
  const bool servicesSeeIt = !haveEnv_ || !env.sameForServices(env_);
  if (envChanged)
    for (const auto& w : env.warnings) LOG(WARNING) << w;
  env_ = std::move(env);
  haveEnv_ = true;

  bool incremental = changed && last_.tables.size() == 2 && !servicesSeeIt;
  touched_.clear();
  lastWasIncremental_ = incremental;
  if (!incremental) {
    last_.tables.clear();
    for (Family f : kFamilies) {
      Table t{f, kTableName, tableDeclarations(f, cfg_), localhostCounters(f, cfg_), {}};
      t.parts[kBaseOwner] = renderBasePart(f, cfg_, env_.of(f));
      last_.tables.push_back(std::move(t));
    }
  } else if (envChanged) {
    for (Table& t : last_.tables) t.parts[kBaseOwner] = renderBasePart(t.family, cfg_, env_.of(t.family));
    touched_.insert(kBaseOwner);
  }

  auto proxied = [&](const std::string& key) -> const api::Service* {
    auto it = st.services.find(key);
    return it != st.services.end() && services::serviceIsProxied(*it->second, cfg_) ? it->second.get() : nullptr;
  };

  // Contested destinations first: a change may hand a nodePort or an external IP to another
  // service, which must then be rendered too.
  std::set<std::string> keySet;
  if (incremental) {
    keySet.insert(changed->begin(), changed->end());
    keySet.insert(chosen_.begin(), chosen_.end());
    std::set<std::string> affected;
    for (const std::string& key : keySet) claims_.update(key, proxied(key), &affected);
    keySet.insert(affected.begin(), affected.end());
  } else {
    claims_.clear();
    for (const auto& [key, svc] : st.services) {
      keySet.insert(key);
      claims_.update(key, proxied(key), nullptr);
    }
  }
  std::vector<std::string> keys(keySet.begin(), keySet.end());  // sorted: allocation order must not depend on how we got here

  if (!incremental)
    for (size_t f = 0; f < 2; ++f) picksByService_[f].clear(), pickUsers_[f].clear();
  // Each service's parts, one per family. A service's render reads the state, the claims, the
  // least-connection choices (by owner, which names the family: what the first family's render
  // adopts below is never the second's) and the environment, and writes only its own slot orders;
  // what it returns is applied below in key order, as one thread would have. So a render of many
  // services (start-up, a changed environment, a big batch of changes) runs on two threads, each
  // on its own contiguous half of the keys: the render is ~20 % of a cold start's sync at 10k.
  const size_t families = last_.tables.size();
  std::vector<ServicePart> rendered(keys.size() * families);
  auto renderRange = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      const api::Service* svc = proxied(keys[i]);
      if (!svc) continue;
      const std::vector<const api::EndpointSlice*> slices = services::slicesOf(st, keys[i]);
      for (size_t f = 0; f < families; ++f) {
        const Family family = last_.tables[f].family;
        rendered[i * families + f] =
            renderServicePart(*svc, slices, cfg_, family, orders_, env_.of(family), &claims_, &choices_);
      }
    }
  };
  if (threads_ > 1 && keys.size() >= kThreadedRenderMinServices) {
    orders_.prepareServices(keys);
    const size_t half = keys.size() / 2;
    std::exception_ptr failed;
    std::thread second([&] {
      try {
        renderRange(half, keys.size());
      } catch (...) {
        failed = std::current_exception();
      }
    });
    try {
      renderRange(0, half);
    } catch (...) {
      second.join();
      throw;
    }
    second.join();
    if (failed) std::rethrow_exception(failed);
  } else {
    renderRange(0, keys.size());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    if (incremental) touched_.insert(ownerOf(key));
    std::vector<std::string> placed;
    std::vector<services::LeastConnPort> leastConn;
    for (size_t f = 0; f < families; ++f) {
      Table& t = last_.tables[f];
      ServicePart& sp = rendered[i * families + f];
      placed.insert(placed.end(), sp.orderOwners.begin(), sp.orderOwners.end());
      for (services::LeastConnPort& lc : sp.leastConn) leastConn.push_back(std::move(lc));
      // What a restart found stays the choice until the counts make one (no render needed).
      for (auto& [owner, values] : sp.adoptedChoices) choices_.set(key, owner, std::move(values));
      usePicks(f, key, std::move(sp.picks));
      if (sp.part) t.parts[ownerOf(key)] = std::move(sp.part);
      else t.parts.erase(ownerOf(key));
    }
    orders_.retain(key, placed);
    noteLeastConn(key, std::move(leastConn));
  }
  chosen_.clear();
  if (!incremental) {
    // Services that are gone keep no orders; listed orders nobody claimed are stale.
    std::vector<std::string> gone;
    for (const auto& [key, owners] : orders_.orders())
      if (!proxied(key)) gone.push_back(key);
    for (const std::string& key : gone) orders_.erase(key);
    orders_.dropAdopted();
    for (auto it = leastConn_.begin(); it != leastConn_.end();) {
      if (proxied(it->first)) ++it;
      else it = leastConn_.erase(it), ++leastConnVersion_;
    }
  }
  // A count change inside the pool leaves the declared chains as they are: elements only.
  for (size_t f = 0; f < last_.tables.size(); ++f) {
    PickLayout picks = declaredPicks(pickUsers_[f]);
    if (incremental && picks == declaredPicks_[f]) continue;
    Table& t = last_.tables[f];
    t.parts[kPicksOwner] = picksPart(t.family, picks);
    declaredPicks_[f] = std::move(picks);
    if (incremental) touched_.insert(kPicksOwner);
  }
  return last_;
}

bool Renderer::choose(const std::string& serviceKey, const std::string& owner, std::vector<std::string> values) {
  if (!choices_.set(serviceKey, owner, std::move(values))) return false;
  chosen_.insert(serviceKey);
  return true;
}

void Renderer::noteLeastConn(const std::string& key, std::vector<services::LeastConnPort> ports) {
  auto it = leastConn_.find(key);
  if (ports.empty()) {
    choices_.erase(key);
    if (it == leastConn_.end()) return;
    leastConn_.erase(it);
  } else if (it == leastConn_.end()) {
    leastConn_.emplace(key, std::move(ports));
  } else if (it->second != ports) {
    it->second = std::move(ports);
  } else {
    return;
  }
  ++leastConnVersion_;
}

void Renderer::adoptSlots(const std::vector<ListedTable>& kernel) {
  for (size_t i = 0; i < kernel.size() && i < 2; ++i) adoptOrders(kFamilies[i], kernel[i], orders_);
}

}  // namespace kpn::render
