// State + node config -> the desired ruleset (both families).
// renderServicePart is the pure core: one Service and its slices -> that Service's part of one
// family's table. The Renderer around it reuses the previous part of every Service whose objects
// did not change, which must equal a from-scratch render with the same backend slots (tested).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nft/listing.h"
#include "nft/model.h"
#include "pkg/render/backend_slots.h"
#include "pkg/render/claims.h"
#include "pkg/render/environment.h"
#include "pkg/render/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::render {

// Services that get no rules: headless, ExternalName, or handled by another proxy.
bool serviceIsProxied(const api::Service& svc, const NodeConfig& cfg);

// Null when the service has nothing in this family. `env`: this family's environment (local-traffic
// detector, node IPs); `claims`: who holds contested destinations (null: this service holds all).
nft::PartPtr renderServicePart(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                               const NodeConfig& cfg, nft::Family family, BackendSlots& slots,
                               const FamilyEnvironment& env = {}, const DestinationClaims* claims = nullptr);

class Renderer {
 public:
  explicit Renderer(NodeConfig cfg);

  // Renders everything. With `changed` (service keys), services outside it reuse their previous
  // parts; without it, every service is rendered again. The Node object, the ServiceCIDRs and the
  // host addresses are compared with the previous render's: a change the base chains alone see
  // re-renders just the base part; one the services see (pod CIDR detector, node IP) all of them.
  // Services that win or lose a contested destination through a change are re-rendered too.
  // The reference stays valid (and unchanged) until the next render: callers that keep a result
  // copy it, so a one-service change does not pay for copying 10k Parts before its commit.
  const nft::Ruleset& render(const state::ClusterState& st, const std::set<std::string>* changed);

  // Start-up: take over the backend ranges our tables already use, so the first sync after a
  // restart keeps every element where it is.
  void adoptSlots(const std::vector<nft::ListedTable>& kernel);

  // This namespace's addresses (NodePort addresses, the node IP without a Node object); call
  // before render. Cheap to call every sync: an unchanged value changes nothing.
  void setHostAddresses(net::HostAddresses host) { host_ = std::move(host); }

  const NodeConfig& config() const { return cfg_; }
  const Environment& environment() const { return env_; }
  const BackendSlots& slots() const { return slots_; }
  void setSlots(BackendSlots s) { slots_ = std::move(s); }
  // The declarations-only ruleset (no parts): what the start-up native transaction needs.
  nft::Ruleset skeleton() const;

  // After an incremental render: the owners (table.parts keys) it may have changed; every other
  // Part is the same pointer as in the render before. nullptr after a from-scratch render.
  const std::set<std::string>* touchedOwners() const { return lastWasIncremental_ ? &touched_ : nullptr; }

 private:
  NodeConfig cfg_;
  BackendSlots slots_;
  net::HostAddresses host_;
  Environment env_;
  bool haveEnv_ = false;
  DestinationClaims claims_;
  nft::Ruleset last_;  // the previous render, one table per family
  std::set<std::string> touched_;
  bool lastWasIncremental_ = false;
};

}  // namespace kpn::render
