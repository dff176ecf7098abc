// State + node config -> the desired ruleset (both families). The Renderer reuses the previous
// Part of every Service whose objects did not change (service_part.h renders one), which must equal
// a from-scratch render with the same endpoint orders (tested), and keeps the shared pick chains
// (pick_chains.h) of the key spaces and protocols in use, in a Part of their own.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "nft/listing.h"
#include "nft/model.h"
#include "pkg/render/backend_order.h"
#include "pkg/render/least_conn.h"
#include "pkg/render/service_part.h"
#include "pkg/services/claims.h"
#include "pkg/services/environment.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::render {

class Renderer : public services::LeastConnTarget {
 public:
  explicit Renderer(services::NodeConfig cfg);

  // Renders everything. With `changed` (service keys), services outside it reuse their previous
  // parts; without it, every service is rendered again. The Node object, the ServiceCIDRs and the
  // host addresses are compared with the previous render's: a change the base chains alone see
  // re-renders just the base part; one the services see (a node IP) all of them.
  // Services that win or lose a contested destination through a change are re-rendered too.
  // The reference stays valid (and unchanged) until the next render: callers that keep a result
  // copy it, so a one-service change does not pay for copying 10k Parts before its commit.
  const nft::Ruleset& render(const state::ClusterState& st, const std::set<std::string>* changed);

  // Start-up: take over the endpoint orders our tables already hold (this layout's, or the
  // chain-per-service layout's before it), so the first sync after a restart or an upgrade keeps
  // every endpoint at its slot.
  void adoptSlots(const std::vector<nft::ListedTable>& kernel);

  // Least connection (least_conn.h): the endpoints an endpoint set's slots name from now on. True
  // when that differs from before: the service is rendered again by the next render, changed or not.
  bool choose(const std::string& serviceKey, const std::string& owner, std::vector<std::string> values) override;
  // Services with a new choice that no render has taken yet.
  bool hasChoices() const { return !chosen_.empty(); }
  // The least-connection ports of the last render, by service, and a number that grows whenever
  // they change (what the connection counter watches).
  const std::map<std::string, std::vector<services::LeastConnPort>>& leastConnPorts() const override {
    return leastConn_;
  }
  uint64_t leastConnVersion() const override { return leastConnVersion_; }

  // This namespace's addresses (NodePort addresses, the node IP without a Node object); call
  // before render. Cheap to call every sync: an unchanged value changes nothing.
  void setHostAddresses(net::HostAddresses host) { host_ = std::move(host); }

  const services::NodeConfig& config() const { return cfg_; }
  const services::Environment& environment() const { return env_; }
  const BackendOrders& slots() const { return orders_; }
  void setSlots(BackendOrders s) { orders_ = std::move(s); }
  // The declarations-only ruleset (no parts): what the start-up native transaction needs.
  nft::Ruleset skeleton() const;

  // A render of at least kThreadedRenderMinServices services runs on this many threads (1 or 2;
  // default 2 where the machine has 2 CPUs or more). Tests set it to compare both ways.
  void setRenderThreads(unsigned n) { threads_ = n > 1 ? 2 : 1; }
  static constexpr size_t kThreadedRenderMinServices = 256;

  // After an incremental render: the owners (table.parts keys) it may have changed; every other
  // Part is the same pointer as in the render before. nullptr after a from-scratch render.
  const std::set<std::string>* touchedOwners() const { return lastWasIncremental_ ? &touched_ : nullptr; }

 private:
  services::NodeConfig cfg_;
  BackendOrders orders_;
  net::HostAddresses host_;
  services::Environment env_;
  bool haveEnv_ = false;
  services::DestinationClaims claims_;
  nft::Ruleset last_;  // the previous render, one table per family
  std::set<std::string> touched_;
  // The pick chains each service's Parts use, per family, and how many services use each.
  std::map<std::string, std::vector<Pick>> picksByService_[2];
  std::map<Pick, int> pickUsers_[2];
  PickLayout declaredPicks_[2];  // the pools and pick chains the last render declared (pick_chains.h)
  LeastConnChoices choices_;
  std::set<std::string> chosen_;  // services whose choice changed since their last render
  std::map<std::string, std::vector<services::LeastConnPort>> leastConn_;
  uint64_t leastConnVersion_ = 0;
  void usePicks(size_t family, const std::string& key, std::vector<Pick> picks);
  void noteLeastConn(const std::string& key, std::vector<services::LeastConnPort> ports);
  bool lastWasIncremental_ = false;
  unsigned threads_ = 1;
};

}  // namespace kpn::render
