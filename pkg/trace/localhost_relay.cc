#include "pkg/trace/localhost_relay.h"

#include "pkg/render/layout.h"
#include "pkg/render/localhost_nodeports.h"
#include "pkg/trace/explain.h"

namespace kpn::trace {

namespace {

// Stand-ins from the benchmarking ranges (RFC 2544, RFC 5180): never a node's, a pod's or a
// Service's address, so only the NodePort rules can match them.
const char* standInNodePort(nft::Family f) { return f == nft::Family::IPv4 ? "198.18.0.1" : "2001:2::1"; }
const char* standInClient(nft::Family f) { return f == nft::Family::IPv4 ? "198.18.0.2" : "2001:2::2"; }

std::string hostPort(const std::string& ip, uint16_t port) {
  return (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

}  // namespace

void explainLocalhostNodePort(const nft::eval::EvalTable& table, const net::HostAddresses& host,
                              const std::vector<nft::eval::Route>& routes, const SourceChooser& choose,
                              nft::eval::Report& report) {
  const nft::eval::Packet& p = report.trace.packet;
  if (p.entry != nft::eval::Entry::Output || !net::isLoopback(p.daddr)) return;
  if (report.verdict != "accept") return;  // something else decided first (UDP, SCTP: the reject)
  const net::Family nf = p.family == nft::Family::IPv4 ? net::Family::V4 : net::Family::V6;
  const std::string listener = hostPort(p.daddr, p.dport);

  // The listener's view: outside traffic to a NodePort address, through the same table.
  nft::eval::EvalTable view = table;
  view.sets[render::kNodePortIPs].elements.emplace_back("\"" + std::string(standInNodePort(p.family)) + "\"", "");
  nft::eval::Packet relay = p;
  relay.entry = nft::eval::Entry::Prerouting;
  relay.saddr = standInClient(p.family);
  relay.daddr = standInNodePort(p.family);
  relay.iifname = host.defaultRouteInterface[p.family == nft::Family::IPv4 ? 0 : 1];
  nft::eval::Environment env = environmentFor(host, routes, relay, choose);
  env.localAddresses.push_back(relay.daddr);
  nft::eval::Trace t = nft::eval::evaluate({view}, relay, env);
  nft::eval::Report seen = nft::eval::makeReport(t, false);
  if (!seen.service) return;  // not a NodePort: the node's own socket on that port, if any
  const std::string what = *seen.service;

  if (!table.sets.count(render::kLocalhostNodePorts)) {
    report.reason = "NodePort " + std::to_string(p.dport) + " (" + what + ") is not served on loopback: " +
                    "nodePortAddresses has no loopback entry for this family ('localhost', or a CIDR holding " +
                    render::loopbackAddress(nf) + "); a socket of the node on " + listener + " answers, if any";
    return;
  }
  if (p.protocol != "tcp") return;
  if (p.daddr != render::loopbackAddress(nf)) {
    report.reason = "NodePort " + std::to_string(p.dport) + " (" + what + "): its localhost listener is on " +
                    hostPort(render::loopbackAddress(nf), p.dport) + " only; a socket of the node on " + listener +
                    " answers, if any";
    return;
  }
  // Shown as a step of its own after the kernel's: "input listener 127.0.0.1:30001: ...".
  nft::eval::ReportStep step{"input", "listener " + listener, "", "", {}};
  step.match = "kube-proxy-nft's localhost NodePort listener (" + what + ")";
  report.service = what;
  if (seen.verdict != "dnat") {
    report.verdict = "reject";
    report.reason = "localhost NodePort without a listener: " + what +
                    (seen.verdict == "drop" ? " has no endpoint on this node (externalTrafficPolicy Local)"
                                            : " has no ready or serving endpoint") +
                    ", so nothing listens on " + listener + " and the kernel refuses the connection";
    step.match = "none: " + what + " has no endpoint a listener could use";
    step.verdict = "refused (TCP reset)";
    report.path.push_back(step);
    report.trace.candidates.clear();
    return;
  }
  std::vector<nft::eval::Candidate> out;
  for (nft::eval::Candidate c : t.candidates) {
    if (!c.translated) continue;
    c.masquerade = false;
    c.path.clear(), c.chains.clear(), c.recorded.clear(), c.notes.clear();
    if (auto src = choose(c.address)) c.sourceSeen = *src;
    out.push_back(std::move(c));
  }
  step.verdict = "relayed to one of " + std::to_string(out.size()) +
                 " endpoint(s), chosen at random (ClientIP affinity: one for all loopback clients)";
  report.path.push_back(step);
  report.trace.candidates = std::move(out);
  report.verdict = "relay";
  report.masquerade = false;
  report.masqueradeWhy = "the listener's own connection: the endpoint sees the node's address toward it";
  report.sticky.reset();
  explainForOurLayout(seen);
  report.reason = "localhost NodePort: kube-proxy-nft listens on " + listener + " and connects to an endpoint of " + what +
                  (seen.reason.find("externalTrafficPolicy Local") != std::string::npos
                       ? ", this node's only (externalTrafficPolicy Local)"
                       : "") +
                  " (upstream KEP-6032; UDP and SCTP there are refused)";
}

}  // namespace kpn::trace
