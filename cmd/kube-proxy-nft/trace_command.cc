#include "cmd/kube-proxy-nft/trace_command.h"

#include <glog/logging.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cmd/kube-proxy-nft/flags.h"
#include "cmd/kube-proxy-nft/state_source.h"
#include "cmd/kube-proxy-nft/trace_session.h"
#include "nft/trace_report.h"
#include "pkg/config/node_config.h"
#include "pkg/diag/local_socket.h"
#include "pkg/diag/state_query.h"
#include "pkg/trace/causes.h"
#include "pkg/trace/frontends.h"
#include "pkg/trace/known_state.h"
#include "pkg/trace/request.h"

namespace kpn::cmd {

namespace {

// What a source flag's cluster state holds (the trace then renders it), without touching the
// kernel. For a Service target the source is also asked, by name, for a Service it leaves out.
std::optional<trace::KnownState> stateFromSource(const config::Loaded& conf, const trace::Request& req, int* rc) {
  trace::KnownState k;
  k.origin = "source";
  k.cfg.nodeName = config::nodeName(conf.config, localHostname());
  std::vector<std::string> warnings;
  if (auto err = config::toNodeConfig(conf.config, k.cfg, &warnings)) {
    std::cerr << "trace: " << *err << "\n";
    *rc = 2;
    return std::nullopt;
  }
  auto source = makeSource(conf, k.cfg.nodeName, k.state, nullptr);
  source->start();
  if (!waitSynced(*source, -1, std::chrono::seconds(60))) {
    std::cerr << "trace: " << source->describe() << " did not list everything within 60 s\n";
    *rc = 1;
    return std::nullopt;
  }
  k.servicesKnown = k.state.services.size();
  if (req.service && !k.service(req.service->ns + "/" + req.service->name)) {
    auto ex = source->lookupExcluded(req.service->ns, req.service->name);
    k.excluded = std::move(ex.service);
  }
  return k;
}

// The running daemon's state, over its status socket: what it knows of the target.
std::optional<trace::KnownState> stateFromDaemon(const std::string& socketName, const trace::Request& req,
                                                 nft::eval::StateInfo* info) {
  *info = {"none", false, 0, ""};
  if (socketName.empty()) {
    info->note = "--status-socket is empty: no daemon asked, the table alone explains the verdict";
    return std::nullopt;
  }
  diag::StateQuery q;
  if (req.service) {
    q.kind = diag::StateQuery::Kind::Service;
    q.ns = req.service->ns;
    q.name = req.service->name;
  } else {
    q.kind = diag::StateQuery::Kind::Address;
    q.ip = req.dst;
    q.port = req.dport;
    q.protocol = req.proto;
  }
  std::string error;
  std::optional<diag::StateAnswer> answer;
  if (auto text = diag::askLocalSocket(socketName, diag::queryLine(q), 15000, &error))
    answer = diag::parseStateAnswer(*text, &error);
  std::optional<trace::KnownState> k;
  if (answer) k = trace::knownFromDaemon(std::move(*answer), &error);
  if (!k) {
    info->note = "the daemon did not answer (" + error + "): the table alone explains the verdict";
    return std::nullopt;
  }
  info->origin = "daemon";
  info->synced = k->daemon->source.synced && k->daemon->lastSuccess.has_value();
  info->servicesKnown = k->servicesKnown;
  return k;
}

int traceAddress(TraceSession& session, const trace::Request& req) {
  trace::ServiceFrontend target{"", req.dst, req.dport, req.proto, ""};
  std::string why, error;
  auto packet = session.packetToward(req, target, &why);
  if (!packet) {
    std::cerr << "trace: " << why << "\n";
    return 2;
  }
  auto report = session.trace(req, *packet, std::nullopt, nullptr, false, &error);
  if (!report) {
    std::cerr << error << "\n";
    return 1;
  }
  std::cout << (req.output == trace::Output::Json ? nft::eval::reportJson(*report) : nft::eval::reportText(*report));
  return report->verdict == "unsupported" ? 1 : 0;
}

// Every address of a Service (or what its DNS name resolves to), one report each.
int traceService(TraceSession& session, const trace::Request& req) {
  const trace::ServiceTarget& t = *req.service;
  const std::string key = t.ns + "/" + t.name;
  const trace::KnownState* known = session.known();
  nft::eval::ServiceReport out;
  out.service = key;
  out.port = t.port;
  out.state = session.info();
  const api::Service* svc = known ? known->service(key) : nullptr;
  bool excluded = false;
  if (!svc && known && known->excluded) {
    svc = &*known->excluded;
    excluded = true;
  }
  std::vector<trace::ServiceFrontend> fronts;
  if (svc) {
    std::vector<std::string> nodePorts = session.nodePortAddresses(nft::Family::IPv4);
    for (auto& a : session.nodePortAddresses(nft::Family::IPv6)) nodePorts.push_back(a);
    fronts = trace::serviceFrontends(*svc, known->slicesOf(key), t, req.proto, nodePorts);
  }
  bool unsupported = false;
  for (const auto& f : fronts) {
    std::string why, error;
    auto packet = session.packetToward(req, f, &why);
    if (!packet) {
      out.skipped.push_back(f.kind + " " + f.address + ":" + std::to_string(f.port) + ": " + why);
      continue;
    }
    auto report = session.trace(req, *packet, f, svc, excluded, &error);
    if (!report) {
      std::cerr << error << "\n";
      return 1;
    }
    unsupported = unsupported || report->verdict == "unsupported";
    out.frontends.push_back(std::move(*report));
  }
  if (out.frontends.empty()) out.cause = trace::nothingToTrace(t, known, svc, excluded);
  std::cout << (req.output == trace::Output::Json ? nft::eval::serviceReportJson(out) : nft::eval::serviceReportText(out));
  return unsupported ? 1 : 0;
}

}  // namespace

constexpr const char* kUsage =
    "kube-proxy-nft trace --from=pod|node|external --src=IP[:PORT] --dst=IP:PORT --proto=tcp|udp|sctp "
    "[--iif=NAME] [--output=text|json] [--manifests=DIR | --kubeconfig=FILE | --master=URL, and the daemon's "
    "flags]: one new connection's path through this node's live table, or through the ruleset the source renders\n"
    "kube-proxy-nft trace --service=NAMESPACE/NAME[:PORT] | --dst=NAME.NAMESPACE[.svc[.cluster.local]]:PORT "
    "[--from=node|pod|external] [--src=IP[,IP]] [--proto=...] [...]: every address of a Service (or what its DNS "
    "name resolves to)\n"
    "The running daemon (--status-socket) or the source flag says why: the real cause of each verdict "
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

  bool rendered = !conf.options.manifests.empty() || !conf.config.clientConnection.kubeconfig.empty() ||
                  !conf.options.master.empty();
  std::optional<trace::KnownState> known;
  nft::eval::StateInfo info;
  if (rendered) {
    int rc = 1;
    known = stateFromSource(conf, req, &rc);
    if (!known) return rc;
    info = {"source", true, known->servicesKnown, ""};
  } else {
    known = stateFromDaemon(conf.options.statusSocket, req, &info);
  }
  TraceSession session(rendered, std::move(known), std::move(info));
  return req.service ? traceService(session, req) : traceAddress(session, req);
}

}  // namespace kpn::cmd
