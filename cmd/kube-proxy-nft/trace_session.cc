#include "cmd/kube-proxy-nft/trace_session.h"

#include "cmd/kube-proxy-nft/nft_runner_options.h"
#include "pkg/render/layout.h"
#include "pkg/render/render.h"
#include "pkg/sync/planner.h"
#include "pkg/trace/causes.h"
#include "pkg/trace/drift.h"
#include "pkg/trace/explain.h"
#include "pkg/trace/localhost_relay.h"

namespace kpn::cmd {

namespace {

std::string tableMissingReason(nft::Family f) {
  return "no table " + std::string(nft::familyName(f)) + " " + render::kTableName + " on this node; ";
}

}  // namespace

TraceSession::TraceSession(bool rendered, std::optional<trace::KnownState> known, nft::eval::StateInfo info)
    : rendered_(rendered),
      known_(std::move(known)),
      info_(std::move(info)),
      host_(net::readHostAddresses()),
      routes_(trace::readRoutes()) {}

const nft::ListedTable* TraceSession::live(nft::Family f, std::string* error) {
  auto it = live_.find(f);
  if (it != live_.end()) return &it->second;
  nft::NftRunner runner(nftRunnerOptions());
  nft::ListedTable listed;
  auto r = runner.list(f, render::kTableName, &listed);
  if (!r.ok) {
    *error = "trace: cannot list table " + std::string(nft::familyName(f)) + " " + render::kTableName + ": " + r.error;
    return nullptr;
  }
  return &live_.emplace(f, std::move(listed)).first->second;
}

// The state's own rendering of this node's tables. For the live table the endpoint slots are the
// kernel's (adopted from its listing), so that only real differences are drift.
const nft::Ruleset* TraceSession::desired() {
  if (desired_) return &*desired_;
  if (!known_) return nullptr;
  render::Renderer renderer(known_->cfg);
  renderer.setHostAddresses(host_);
  // The plan path's render step, as the daemon's first sync takes it: against the listing.
  sync::PlanRequest req;
  sync::PlanBase base = sync::PlanBase::declaredOnly();
  if (!rendered_) {
    std::vector<nft::ListedTable> aligned;
    std::string ignored;
    for (const auto& t : renderer.skeleton().tables) {
      const nft::ListedTable* l = live(t.family, &ignored);
      aligned.push_back(l ? *l : nft::ListedTable{});
    }
    req.adoptSlots = true;
    base = sync::PlanBase::fromListing(std::move(aligned), false);
  }
  desired_ = sync::renderFor(renderer, known_->state, req, base);
  env_ = renderer.environment();
  return &*desired_;
}

std::vector<std::string> TraceSession::nodePortAddresses(nft::Family f) {
  if (!desired()) return {};
  const services::FamilyEnvironment& e = env_->of(f);
  if (!e.nodePortMatchAll) return e.nodePortIPs;
  std::vector<std::string> out;
  for (const auto& a : host_.addresses)
    if ((a.family == net::Family::V6) == (f == nft::Family::IPv6) && !net::isLoopback(a.ip)) out.push_back(a.ip);
  return out;
}

std::optional<nft::eval::Packet> TraceSession::packetToward(const trace::Request& req, const trace::ServiceFrontend& f,
                                                            std::string* skipped) {
  net::Family fam = net::familyOf(f.address).value_or(net::Family::V4);
  std::string src = trace::sourceFor(req, fam);
  if (src.empty()) {
    if (req.from != trace::From::Node) {
      *skipped = "no --src of this address family was given";
      return std::nullopt;
    }
    auto chosen = trace::sourceAddressToward(f.address);
    if (!chosen) {
      *skipped = "this node has no route toward it";
      return std::nullopt;
    }
    src = *chosen;
  }
  std::string iif = req.iif;
  if (iif.empty() && req.from != trace::From::Node) iif = trace::routeInterface(routes_, src);
  nft::eval::Packet p = trace::packetTo(req, src, f.address, f.port, f.protocol, iif);
  if (p.entry == nft::eval::Entry::Prerouting && p.iifname.empty())
    p.iifname = host_.defaultRouteInterface[p.family == nft::Family::IPv4 ? 0 : 1];
  return p;
}

std::optional<nft::eval::Report> TraceSession::trace(const trace::Request& req, nft::eval::Packet packet,
                                                     const std::optional<trace::ServiceFrontend>& frontend,
                                                     const api::Service* service, bool excluded, std::string* error) {
  (void)req;
  const nft::Family f = packet.family;
  std::optional<nft::eval::EvalTable> table;
  bool exists = true;
  const nft::Ruleset* want = desired();
  if (rendered_) {
    table = nft::eval::EvalTable{f, render::kTableName, {}, {}};
    if (want)
      for (const auto& t : want->tables)
        if (t.family == f) table = nft::eval::tableFromModel(t);
  } else {
    const nft::ListedTable* l = live(f, error);
    if (!l) return std::nullopt;
    exists = l->exists;
    table = nft::eval::tableFromListing(f, render::kTableName, *l);
  }
  auto env = trace::environmentFor(host_, routes_, packet, trace::sourceAddressToward);
  nft::eval::Trace t = nft::eval::evaluate(std::vector<nft::eval::EvalTable>{*table}, packet, env);
  trace::refineMasquerade(t, trace::sourceAddressToward);
  nft::eval::Report report = nft::eval::makeReport(std::move(t), /*kernelEntries=*/!rendered_);
  trace::explainForOurLayout(report);
  trace::explainLocalhostNodePort(*table, host_, routes_, trace::sourceAddressToward, report);
  if (!exists) report.reason = tableMissingReason(f) + report.reason;

  // What the state says: the Service at the address (when the target was an address), drift, cause.
  trace::CauseContext c;
  c.known = known();
  c.tableExists = exists;
  c.frontend = frontend;
  c.service = service;
  c.excluded = excluded;
  if (c.known && !service) {
    std::vector<std::string> nodePorts = nodePortAddresses(f);
    bool nodePortAddress = std::find(nodePorts.begin(), nodePorts.end(), packet.daddr) != nodePorts.end();
    c.service = trace::serviceAt(*c.known, packet.daddr, packet.dport, packet.protocol, nodePortAddress, &c.addressOnly);
  }
  if (env_) c.zone = env_->of(f).zone;
  if (c.known && c.service && !rendered_ && !excluded && want)
    for (const auto& t : want->tables)
      if (t.family == f) {
        const nft::ListedTable* l = live(f, error);
        if (l) c.drift = trace::serviceDrift(*l, t, c.service->meta.ns + "/" + c.service->meta.name);
      }
  report.cause = trace::causeOf(report, c);
  if (frontend) {
    std::string key = service ? service->meta.ns + "/" + service->meta.name : "";
    report.frontend = nft::eval::Frontend{frontend->kind, key, frontend->portName};
  }
  report.state = info_;
  return report;
}

}  // namespace kpn::cmd
