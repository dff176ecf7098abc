#include "cmd/kube-proxy-nft/trace_command.h"

#include <glog/logging.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cmd/kube-proxy-nft/flags.h"
#include "cmd/kube-proxy-nft/state_source.h"
#include "nft/eval_table.h"
#include "nft/runner.h"
#include "nft/trace_report.h"
#include "pkg/config/node_config.h"
#include "pkg/render/layout.h"
#include "pkg/render/render.h"
#include "pkg/trace/explain.h"
#include "pkg/trace/localhost_relay.h"
#include "pkg/trace/node_view.h"
#include "pkg/trace/request.h"

namespace kpn::cmd {

namespace {

// The live table of this node: our own table only, listed through the scoped helper.
std::optional<nft::eval::EvalTable> liveTable(nft::Family f, bool* exists, std::string* error) {
  nft::NftRunner runner;
  nft::ListedTable listed;
  auto r = runner.list(f, render::kTableName, &listed);
  if (!r.ok) {
    *error = "trace: cannot list table " + std::string(nft::familyName(f)) + " " + render::kTableName + ": " + r.error;
    return std::nullopt;
  }
  *exists = listed.exists;
  return nft::eval::tableFromListing(f, render::kTableName, listed);
}

// The table the source flags' cluster state renders for this node, without touching the kernel.
std::optional<nft::eval::EvalTable> renderedTable(const config::Loaded& conf, nft::Family f,
                                                  const net::HostAddresses& host, int* rc) {
  render::NodeConfig cfg;
  cfg.nodeName = config::nodeName(conf.config, localHostname());
  std::vector<std::string> warnings;
  if (auto err = config::toNodeConfig(conf.config, cfg, &warnings)) {
    std::cerr << "trace: " << *err << "\n";
    *rc = 2;
    return std::nullopt;
  }
  state::ClusterState state;
  auto source = makeSource(conf, cfg.nodeName, state, nullptr);
  source->start();
  if (!waitSynced(*source, -1, std::chrono::seconds(60))) {
    std::cerr << "trace: " << source->describe() << " did not list everything within 60 s\n";
    *rc = 1;
    return std::nullopt;
  }
  render::Renderer renderer(cfg);
  renderer.setHostAddresses(host);
  nft::Ruleset rs = renderer.render(state, nullptr);
  for (const auto& t : rs.tables)
    if (t.family == f) return nft::eval::tableFromModel(t);
  return nft::eval::EvalTable{f, render::kTableName, {}, {}};
}

}  // namespace

constexpr const char* kUsage =
    "kube-proxy-nft trace --from=pod|node|external --src=IP[:PORT] --dst=IP:PORT --proto=tcp|udp|sctp "
    "[--iif=NAME] [--output=text|json] [--manifests=DIR | --kubeconfig=FILE | --master=URL, and the daemon's "
    "flags]: one new connection's path through this node's live table, or through the ruleset the source renders "
    "(docs/trace.md)\n";

std::optional<int> runTraceIfAsked(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "trace") != 0) return std::nullopt;
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << kUsage;
      return 0;
    }
  std::string error;
  auto parsed = trace::parseRequest(std::vector<std::string>(argv + 2, argv + argc), &error);
  if (!parsed) {
    std::cerr << error << "\n";
    return 2;
  }
  // Every argument that is not a trace flag must be one of the daemon's (its source and settings).
  config::GivenFlags daemonFlags;
  if (auto bad = config::parseArgs(parsed->rest, daemonFlags)) {
    std::cerr << "trace: " << *bad << "\n";
    return 2;
  }
  FLAGS_minloglevel = 1;  // warnings and errors only: the trace is the output
  const config::Loaded conf = loadConfigOrExit(parsed->rest);
  const trace::Request& req = parsed->request;

  const net::HostAddresses host = net::readHostAddresses();
  const auto routes = trace::readRoutes();
  std::string iif = req.iif;
  if (iif.empty() && req.from != trace::From::Node) iif = trace::routeInterface(routes, req.src);
  nft::eval::Packet packet = trace::packetOf(req, iif);
  if (packet.entry == nft::eval::Entry::Prerouting && packet.iifname.empty())
    packet.iifname = host.defaultRouteInterface[packet.family == nft::Family::IPv4 ? 0 : 1];

  bool rendered = !conf.options.manifests.empty() || !conf.config.clientConnection.kubeconfig.empty() ||
                  !conf.options.master.empty();
  bool exists = true;
  int rc = 1;
  std::optional<nft::eval::EvalTable> table =
      rendered ? renderedTable(conf, packet.family, host, &rc) : liveTable(packet.family, &exists, &error);
  if (!table) {
    if (!error.empty()) std::cerr << error << "\n";
    return rc;
  }
  auto env = trace::environmentFor(host, routes, packet, trace::sourceAddressToward);
  nft::eval::Trace t = nft::eval::evaluate(std::vector<nft::eval::EvalTable>{*table}, packet, env);
  trace::refineMasquerade(t, trace::sourceAddressToward);
  nft::eval::Report report = nft::eval::makeReport(std::move(t), /*kernelEntries=*/!rendered);
  trace::explainForOurLayout(report);
  trace::explainLocalhostNodePort(*table, host, routes, trace::sourceAddressToward, report);
  if (!exists)
    report.reason = "no table " + std::string(nft::familyName(packet.family)) + " " + render::kTableName +
                    " on this node; " + report.reason;
  std::cout << (req.output == trace::Output::Json ? nft::eval::reportJson(report) : nft::eval::reportText(report));
  return report.verdict == "unsupported" ? 1 : 0;
}

}  // namespace kpn::cmd
