// Behaviour tests: render a state with the public render API and ask the packet evaluator what
// becomes of a packet. Assertions name only addresses, ports and verdicts — never a chain, set or
// map — so the same tests hold whatever the table layout is.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "nft/eval/evaluator.h"
#include "pkg/render/render.h"
#include "pkg/state/cluster_state.h"
#include "unit/pipeline.h"

namespace kpn::testing {

// The addresses the tests use.
inline const char* kNodeIP = "192.168.0.2";       // node-a's InternalIP, the NodePort address
inline const char* kNodeIP6 = "2001:db8::1";
inline const char* kOtherLocalIP = "192.168.0.9";  // also on this host, not a NodePort address
inline const char* kOutside = "198.51.100.50";    // a client outside the cluster
inline const char* kOutside6 = "2001:db8:ff::50";

// "10.1.2.3:80 1/2 from 10.0.1.5; 10.1.2.4:80 1/2 from 10.0.1.5", "refused", "dropped",
// "untouched": each way the packet can go, sorted by destination, with its probability when not 1.
inline std::string outcome(const nft::eval::Trace& t) {
  using nft::eval::Verdict;
  std::vector<std::string> parts;
  for (const auto& c : t.candidates) {
    std::string s;
    switch (c.verdict) {
      case Verdict::Accept:
        if (!c.translated) {
          s = "untouched";
        } else {
          s = (c.address.find(':') != std::string::npos ? "[" + c.address + "]" : c.address) + ":" + std::to_string(c.port);
        }
        break;
      case Verdict::Drop: s = "dropped"; break;
      case Verdict::Reject: s = "refused"; break;
      default: s = "unsupported:"; for (const auto& n : c.notes) s += " " + n;
    }
    if (std::abs(c.probability - 1.0) > 1e-9) {
      for (int d = 2; d <= 256; ++d) {
        double k = c.probability * d;
        if (std::abs(k - std::round(k)) < 1e-6) {
          s += " " + std::to_string(static_cast<int>(std::round(k))) + "/" + std::to_string(d);
          break;
        }
      }
    }
    if (c.verdict == Verdict::Accept && c.translated) s += " from " + c.sourceSeen;
    for (const auto& n : c.notes)
      if (c.verdict != Verdict::Unsupported) s += " (" + n + ")";
    parts.push_back(s);
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

inline nft::eval::Packet packet(nft::eval::Entry entry, const std::string& from, const std::string& to, uint16_t port,
                                api::Protocol proto, const std::string& iif) {
  nft::eval::Packet p;
  p.family = to.find(':') == std::string::npos ? nft::Family::IPv4 : nft::Family::IPv6;
  p.saddr = from;
  p.daddr = to;
  p.dport = port;
  p.protocol = proto == api::Protocol::UDP ? "udp" : proto == api::Protocol::SCTP ? "sctp" : "tcp";
  p.entry = entry;
  p.iifname = iif;
  return p;
}

// The node under test, its flags and addresses, a state, and the packets to send.
struct World {
  services::NodeConfig cfg;
  net::HostAddresses host;
  state::ClusterState st;
  nft::eval::Environment env;

  World() {
    cfg.nodeName = "node-a";
    cfg.clusterCidrV4 = net::parseCidr("10.0.0.0/8");
    cfg.clusterCidrV6 = net::parseCidr("fd00:10::/48");
    host.addresses = {{"lo", "127.0.0.1", net::Family::V4},   {"lo", "::1", net::Family::V6},
                      {"eth0", kNodeIP, net::Family::V4},     {"eth0", kOtherLocalIP, net::Family::V4},
                      {"eth1", "192.168.1.2", net::Family::V4}, {"eth0", kNodeIP6, net::Family::V6}};
    host.defaultRouteInterface[0] = "eth0";
    host.defaultRouteInterface[1] = "eth0";
    auto node = std::make_shared<api::Node>();
    node->meta.name = "node-a";
    node->podCIDRs = {"10.0.1.0/24", "fd00:10:0:1::/64"};
    node->addresses = {{"Hostname", "node-a"}, {"InternalIP", kNodeIP}, {"InternalIP", kNodeIP6}};
    st.setNode(node);
    for (const auto& a : host.addresses) env.localAddresses.push_back(a.ip);
    env.masqueradeSource[0] = kNodeIP;
    env.masqueradeSource[1] = kNodeIP6;
    env.routes = {{"10.0.1.0/24", "cni0"}, {"fd00:10:0:1::/64", "cni0"}};
  }

  // Renders from scratch and commits to the fake kernel (which refuses what the kernel refuses),
  // then traces the packet through the rendered model and through what the fake kernel lists:
  // both must say the same.
  nft::eval::Trace trace(const nft::eval::Packet& p) { return traces(p).first; }
  // The same trace through the rendered model (first) and through the fake kernel's listing.
  std::pair<nft::eval::Trace, nft::eval::Trace> traces(const nft::eval::Packet& p) {
    FakePipeline pipe(cfg);
    pipe.renderer.setHostAddresses(host);
    auto changed = st.changedServices;
    pipe.sync(st);
    st.changedServices = changed;  // the state stays as the test left it
    nft::eval::Trace fromModel = nft::eval::evaluate(pipe.committed.ruleset, p, env);
    std::vector<nft::eval::EvalTable> kernelTables;
    for (const auto& t : pipe.committed.ruleset.tables) {
      nft::ListedTable listed;
      pipe.kernel.list(t.family, t.name, &listed);
      kernelTables.push_back(nft::eval::tableFromListing(t.family, t.name, listed));
    }
    nft::eval::Trace fromKernel = nft::eval::evaluate(kernelTables, p, env);
    CHECK(outcome(fromKernel) == outcome(fromModel));
    return {std::move(fromModel), std::move(fromKernel)};
  }
  std::string send(const nft::eval::Packet& p) {
    auto t = trace(p);
    INFO(nft::eval::traceText(t));
    CHECK(t.verdict != nft::eval::Verdict::Unsupported);
    return outcome(t);
  }

  // A pod on this node (its veth, in the node's pod CIDR 10.0.1.0/24 by default).
  std::string fromPod(const std::string& to, uint16_t port, api::Protocol proto = api::Protocol::TCP,
                      const std::string& src = "", const std::string& iif = "veth1") {
    bool v6 = to.find(':') != std::string::npos;
    return send(packet(nft::eval::Entry::Prerouting, src.empty() ? (v6 ? "fd00:10:0:1::5" : "10.0.1.5") : src, to, port,
                       proto, iif));
  }
  // A client beyond the node's uplink (eth0), outside the cluster CIDR by default.
  std::string fromOutside(const std::string& to, uint16_t port, api::Protocol proto = api::Protocol::TCP,
                          const std::string& src = "") {
    bool v6 = to.find(':') != std::string::npos;
    return send(packet(nft::eval::Entry::Prerouting, src.empty() ? (v6 ? kOutside6 : kOutside) : src, to, port, proto, "eth0"));
  }
  // A process on the node itself, from its primary address.
  std::string fromNode(const std::string& to, uint16_t port, api::Protocol proto = api::Protocol::TCP) {
    bool v6 = to.find(':') != std::string::npos;
    return send(packet(nft::eval::Entry::Output, v6 ? kNodeIP6 : kNodeIP, to, port, proto, ""));
  }
};

}  // namespace kpn::testing
