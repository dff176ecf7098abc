#include "pkg/render/layout.h"

#include "pkg/render/affinity.h"
#include "pkg/render/localhost_nodeports.h"
#include "pkg/render/pick_chains.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

Expr daddr(Family f) { return ex::payload(familyName(f), "daddr"); }
Expr saddr(Family f) { return ex::payload(familyName(f), "saddr"); }
Expr serviceKeyExpr(Family f) { return ex::concat({daddr(f), ex::meta("l4proto"), ex::payload("th", "dport")}); }
Stmt ctStateNew() { return st::match(ex::ct("state"), "in", ex::symbol("new")); }

SetDecl firewallAllowDeclaration(const std::string& addr) {
  SetDecl d{kFirewallAllow, {addr, "inet_proto", "inet_service", addr}, "", ""};
  d.interval = true;
  return d;
}

// A new connection to a destination with loadBalancerSourceRanges, from a source none of its
// @firewall-allow elements holds, is dropped (a destination with none is closed to all).
Rule firewallRule(Family f) {
  return makeRule({st::matchSet(serviceKeyExpr(f), kFirewallIPs),
                   st::matchSet(ex::concat({daddr(f), ex::meta("l4proto"), ex::payload("th", "dport"), saddr(f)}),
                                kFirewallAllow, /*negate=*/true),
                   st::drop()},
                  "source not in loadBalancerSourceRanges");
}

Chain baseChain(const char* name, const char* type, const char* hook, int prio, std::vector<Rule> rules) {
  return Chain{name, Hook{type, hook, prio}, std::move(rules)};
}

}  // namespace

std::string portKey(const api::ServicePort& p) { return p.name.empty() ? std::to_string(p.port) : p.name; }

Family toNftFamily(net::Family f) { return f == net::Family::V4 ? Family::IPv4 : Family::IPv6; }

std::vector<SetDecl> tableDeclarations(Family f, const services::NodeConfig& cfg) {
  std::string addr = addrTypeName(f);
  std::vector<SetDecl> decls = {
      {kClusterIPs, {addr}, "", ""},
      {kServiceIPs, {addr, "inet_proto", "inet_service"}, "verdict", ""},
      {kNoEndpointServices, {addr, "inet_proto", "inet_service"}, "verdict", ""},
      {kHairpin, {addr, addr}, "", ""},
      {kServiceNodePorts, {"inet_proto", "inet_service"}, "verdict", ""},
      {kNoEndpointNodePorts, {"inet_proto", "inet_service"}, "verdict", ""},
      {kFirewallIPs, {addr, "inet_proto", "inet_service"}, "", ""},
      firewallAllowDeclaration(addr),
      {kNodePortIPs, {addr}, "", ""},
      {kMasqueradeIPs, {addr, "inet_proto", "inet_service"}, "", ""},
      {kMasqueradeNodePorts, {"inet_proto", "inet_service"}, "", ""},
      {kLocalServiceIPs, {addr, "inet_proto", "inet_service"}, "verdict", ""},
      {kLocalServiceNodePorts, {"inet_proto", "inet_service"}, "verdict", ""},
      {kExternalClusterIPs, {addr, "inet_proto", "inet_service"}, addr, ""},
      {kLocalExternalClusterIPs, {addr, "inet_proto", "inet_service"}, addr, ""},
      {kNodePortClusterIPs, {"inet_proto", "inet_service"}, addr, ""},
      {kLocalNodePortClusterIPs, {"inet_proto", "inet_service"}, addr, ""},
      {kNodePortClusterPorts, {"inet_proto", "inet_service"}, "inet_service", ""},
  };
  for (SetDecl& d : backendsMapDeclarations(f)) decls.push_back(std::move(d));
  for (SetDecl& d : affinitySetDeclarations(f)) decls.push_back(std::move(d));
  for (SetDecl& d : localhostDeclarations(f, cfg)) decls.push_back(std::move(d));
  return decls;
}

PartPtr renderBasePart(Family f, const services::NodeConfig& cfg, const services::FamilyEnvironment& env) {
  auto part = std::make_shared<Part>();
  const uint32_t mark = cfg.masqueradeMark;
  // Traffic to a ClusterIP (most of a cluster's) first, in a chain of its own: its masquerade
  // rule, then the dispatch (`@service-ips`, the shared pick), as upstream's service-ips map
  // comes before everything else. What that does not dispatch (a port the ClusterIP does not
  // serve, or an address that is also an external or NodePort address) returns here and meets
  // every rule below, as before. A pod's first packet to a ClusterIP skips the external and
  // NodePort rules: five set lookups (bench/datapath_bench.py).
  std::vector<Rule> clusterIPServices;
  if (cfg.masqueradeAll) {
    clusterIPServices.push_back(makeRule({st::markSet(ex::bitOr(ex::meta("mark"), mark))}, "masquerade all ClusterIP traffic"));
  } else if (!env.localKind.empty()) {
    clusterIPServices.push_back(makeRule({localTrafficMatch(f, env, true), st::markSet(ex::bitOr(ex::meta("mark"), mark))},
                                         cfg.detectLocal == services::LocalDetectMode::ClusterCIDR
                                             ? "masquerade ClusterIP traffic from outside the cluster CIDR"
                                             : "masquerade ClusterIP traffic not from a local pod"));
  }
  clusterIPServices.push_back(makeRule({st::vmap(serviceKeyExpr(f), kServiceIPs)}));
  clusterIPServices.push_back(makeRule({st::jump(entryChainName(KeySpace::Address))}));
  std::vector<Rule> services = {makeRule({st::matchSet(daddr(f), kClusterIPs), st::jump(kClusterIPServicesChain)})};
  // NodePorts: one lookup on protocol . port, on the NodePort addresses only (never loopback).
  Expr nodePortKey = ex::concat({ex::meta("l4proto"), ex::payload("th", "dport")});
  Stmt loopback = f == Family::IPv4 ? st::match(daddr(f), "!=", ex::prefix("127.0.0.0", 8))
                                    : st::match(daddr(f), "!=", ex::addr("::1"));
  Stmt fibLocal = st::match(ex::fib("daddr", "type"), "==", ex::symbol("local"));
  // "daddr is a NodePort address" followed by `rest`.
  auto onNodePortAddress = [&](std::vector<Stmt> rest, std::string comment = "") {
    std::vector<Stmt> stmts = env.nodePortMatchAll ? std::vector<Stmt>{fibLocal, loopback}
                                                   : std::vector<Stmt>{st::matchSet(daddr(f), kNodePortIPs)};
    stmts.insert(stmts.end(), rest.begin(), rest.end());
    return makeRule(stmts, std::move(comment));
  };
  Stmt markMasq = st::markSet(ex::bitOr(ex::meta("mark"), mark));
  services.push_back(makeRule({st::matchSet(serviceKeyExpr(f), kMasqueradeIPs), markMasq},
                              "masquerade external traffic of eTP=Cluster services"));
  services.push_back(onNodePortAddress({st::matchSet(nodePortKey, kMasqueradeNodePorts), markMasq},
                                       "masquerade NodePort traffic of eTP=Cluster services"));
  // externalTrafficPolicy=Local destinations: the node's own traffic takes every endpoint and is
  // masqueraded, pods (with a detector) take every endpoint with their source, and the rest (from
  // outside) only this node's endpoints, keeping its source.
  // A `fib` match is a route lookup, the dearest expression on the first packet of every
  // connection: it comes after the cheaper matches of its rule (a set lookup, the source CIDR), so
  // a pod's connection to an ordinary ClusterIP makes no route lookup here at all
  // (bench/datapath_bench.py).
  Stmt fromNode = st::match(ex::fib("saddr", "type"), "==", ex::symbol("local"));
  Stmt notFromNode = st::match(ex::fib("saddr", "type"), "!=", ex::symbol("local"));
  services.push_back(makeRule({st::matchSet(serviceKeyExpr(f), kLocalServiceIPs), fromNode, markMasq},
                              "masquerade node traffic to eTP=Local services"));
  services.push_back(onNodePortAddress({st::matchSet(nodePortKey, kLocalServiceNodePorts), fromNode, markMasq},
                                       "masquerade node traffic to eTP=Local NodePorts"));
  std::vector<Stmt> fromOutside;
  if (!env.localKind.empty()) fromOutside.push_back(localTrafficMatch(f, env, true));
  fromOutside.push_back(notFromNode);
  std::vector<Stmt> outsideIPs = fromOutside, outsideNodePorts = fromOutside;
  outsideIPs.push_back(st::vmap(serviceKeyExpr(f), kLocalServiceIPs));
  outsideNodePorts.push_back(st::vmap(nodePortKey, kLocalServiceNodePorts));
  // After each dispatch map, the key space's counted destinations (pick_chains.h). The local
  // ones follow their map at once: eTP=Local outside traffic never reaches the cluster-wide rules.
  std::vector<Stmt> outsideIPsCounted = fromOutside, outsideNodePortsCounted = fromOutside;
  outsideIPsCounted.push_back(st::jump(entryChainName(KeySpace::LocalAddress)));
  outsideNodePortsCounted.push_back(st::jump(entryChainName(KeySpace::LocalNodePort)));
  services.push_back(makeRule(outsideIPs, "outside traffic to eTP=Local services: this node's endpoints"));
  services.push_back(makeRule(outsideIPsCounted));
  services.push_back(onNodePortAddress(outsideNodePorts, "outside traffic to eTP=Local NodePorts: this node's endpoints"));
  services.push_back(onNodePortAddress(outsideNodePortsCounted));
  services.push_back(makeRule({st::vmap(serviceKeyExpr(f), kServiceIPs)}));
  services.push_back(makeRule({st::jump(entryChainName(KeySpace::Address))}));
  // After the ClusterIPs' own pick (they are most of the traffic and pay nothing for this): an
  // external address that shares its ClusterIP's slots becomes that ClusterIP (see layout.h).
  // The eTP=Cluster ones are masqueraded here, as @masquerade-ips does for the others.
  services.push_back(makeRule({st::setFromMap(daddr(f), serviceKeyExpr(f), kExternalClusterIPs), markMasq,
                               st::goTo(entryChainName(KeySpace::Address))},
                              "masquerade eTP=Cluster external IPs and LB IPs, on their ClusterIP's endpoints"));
  services.push_back(makeRule({st::setFromMap(daddr(f), serviceKeyExpr(f), kLocalExternalClusterIPs),
                               st::goTo(entryChainName(KeySpace::Address))},
                              "pods and the node to eTP=Local external IPs and LB IPs"));
  // NodePorts: one address test, then the chain of the NodePort address's traffic.
  services.push_back(onNodePortAddress({st::goTo(kNodePortsChain)}));
  std::vector<Rule> nodePorts = {makeRule({st::vmap(nodePortKey, kServiceNodePorts)}),
                                 makeRule({st::jump(entryChainName(KeySpace::NodePort))})};
  // As for the addresses above, address and port: a rule per protocol, whose keys read `tcp
  // dport` (not `th dport`) so that the protocol test comes before the first rewrite (a UDP packet
  // must not lose its address to the TCP rule), and as nft 1.0.6 lists it back.
  for (const char* proto : {"tcp", "udp"}) {
    Expr dport = ex::payload(proto, "dport");
    Expr key = ex::concat({ex::meta("l4proto"), dport});
    nodePorts.push_back(makeRule({st::setFromMap(daddr(f), key, kNodePortClusterIPs),
                                  st::setFromMap(dport, key, kNodePortClusterPorts), markMasq,
                                  st::goTo(entryChainName(KeySpace::Address))},
                                 std::string("masquerade eTP=Cluster ") + proto + " NodePorts, on their ClusterIP's endpoints"));
    nodePorts.push_back(makeRule({st::setFromMap(daddr(f), key, kLocalNodePortClusterIPs),
                                  st::setFromMap(dport, key, kNodePortClusterPorts),
                                  st::goTo(entryChainName(KeySpace::Address))},
                                 std::string("pods and the node to eTP=Local ") + proto + " NodePorts"));
  }
  // In filter-input the destination is local already: upstream leaves out the fib test here.
  Rule nodePortCheck = env.nodePortMatchAll
                           ? makeRule({loopback, st::vmap(nodePortKey, kNoEndpointNodePorts)})
                           : onNodePortAddress({st::vmap(nodePortKey, kNoEndpointNodePorts)});
  for (const auto& ip : env.nodePortIPs) part->elements.push_back(setElement(kNodePortIPs, ex::addr(ip)));

  std::vector<Rule> clusterIPsCheck = {
      makeRule({st::matchSet(daddr(f), kClusterIPs), st::reject(f)}, "Reject traffic to invalid ports of ClusterIPs")};
  for (const auto& text : env.serviceCIDRs) {
    auto c = net::parseCidr(text);
    clusterIPsCheck.push_back(makeRule({st::match(daddr(f), "==", ex::prefix(c->address, c->prefixLen)), st::drop()},
                                       "Drop traffic to unallocated ClusterIPs"));
  }

  std::vector<Rule> filterInput = {makeRule({ctStateNew(), st::jump("nodeport-endpoints-check")}),
                                   makeRule({ctStateNew(), st::jump("service-endpoints-check")})};
  if (auto jump = localhostRejectJump(f, cfg)) filterInput.insert(filterInput.begin(), *jump);

  part->chains = {
      // Source ranges must be checked before DNAT rewrites the LoadBalancer IP (upstream #122614).
      baseChain("filter-prerouting-pre-dnat", "filter", "prerouting", -110,
                {makeRule({ctStateNew(), st::jump("firewall-check")})}),
      baseChain("filter-output-pre-dnat", "filter", "output", -110,
                {makeRule({ctStateNew(), st::jump("firewall-check")})}),
      baseChain("nat-prerouting", "nat", "prerouting", -100, {makeRule({st::jump(kServicesChain)})}),
      baseChain("nat-output", "nat", "output", -100, {makeRule({st::jump(kServicesChain)})}),
      baseChain("nat-postrouting", "nat", "postrouting", 100, {makeRule({st::jump("masquerading")})}),
      baseChain("filter-input", "filter", "input", 0, std::move(filterInput)),
      baseChain("filter-forward", "filter", "forward", 0,
                {makeRule({ctStateNew(), st::jump("service-endpoints-check")}),
                 makeRule({ctStateNew(), st::jump("cluster-ips-check")})}),
      baseChain("filter-output", "filter", "output", 0,
                {makeRule({ctStateNew(), st::jump("service-endpoints-check")}),
                 makeRule({ctStateNew(), st::jump("cluster-ips-check")})}),
      Chain{kServicesChain, std::nullopt, std::move(services)},
      Chain{kClusterIPServicesChain, std::nullopt, std::move(clusterIPServices)},
      Chain{kNodePortsChain, std::nullopt, std::move(nodePorts)},
      Chain{"masquerading", std::nullopt,
            {makeRule({st::match(ex::bitAnd(ex::meta("mark"), mark), "==", ex::number(mark)),
                       st::markSet(ex::bitXor(ex::meta("mark"), mark)), st::masqueradeFullyRandom()}),
             makeRule({st::match(ex::ct("status"), "in", ex::symbol("dnat")),
                       st::matchSet(ex::concat({saddr(f), daddr(f)}), kHairpin), st::masqueradeFullyRandom()},
                      "hairpin: an endpoint reaching itself through a service")}},
      Chain{"service-endpoints-check", std::nullopt, {makeRule({st::vmap(serviceKeyExpr(f), kNoEndpointServices)})}},
      Chain{"nodeport-endpoints-check", std::nullopt, {nodePortCheck}},
      Chain{"firewall-check", std::nullopt, {firewallRule(f)}},
      Chain{"cluster-ips-check", std::nullopt, std::move(clusterIPsCheck)},
      Chain{kRejectChain, std::nullopt,
            {makeRule({st::reject(f)}, "helper for @no-endpoint-services / @no-endpoint-nodeports")}},
  };
  if (auto reject = localhostRejectChain(f, cfg)) part->chains.push_back(std::move(*reject));
  nft::shrinkToFit(*part);
  return part;
}

Stmt localTrafficMatch(Family f, const services::FamilyEnvironment& env, bool negate) {
  const char* op = negate ? "!=" : "==";
  if (env.localKind == "iifname") {
    // A trailing "*" is nft's interface-name wildcard ("veth*").
    return st::match(ex::meta("iifname"), op, ex::interfaceName(env.localValue));
  }
  auto c = net::parseCidr(env.localValue);
  return st::match(ex::payload(familyName(f), "saddr"), op, ex::prefix(c->address, c->prefixLen));
}

}  // namespace kpn::render
