#include "pkg/render/affinity.h"

#include <arpa/inet.h>

#include <cstring>

#include "pkg/render/pick_chains.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

// ip saddr . <scope> . <port:slot>: the key of a client's slot for a service port.
Expr clientSlotKey(Family f, const AffinityChain& a, uint32_t slot) {
  const uint32_t portSlot = (static_cast<uint32_t>(a.port) << 16) | slot;
  return ex::concat({ex::payload(familyName(f), "saddr"), ex::numgenRandom(1, a.scope), ex::numgenRandom(1, portSlot)});
}

}  // namespace

std::string stickySetName(bool local, api::Protocol proto) {
  return std::string(local ? "local-" : "") + "sticky-" + api::protocolName(proto);
}

std::string affinityChainName(const std::string& chainKey, bool local) {
  return std::string(local ? "local-" : "") + "affinity-" + chainKey;
}

uint32_t affinityScope(const std::string& clusterIP) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, clusterIP.c_str(), buf) == 1) return (uint32_t(buf[0]) << 24) | (buf[1] << 16) | (buf[2] << 8) | buf[3];
  if (inet_pton(AF_INET6, clusterIP.c_str(), buf) == 1)
    return (uint32_t(buf[12]) << 24) | (buf[13] << 16) | (buf[14] << 8) | buf[15];
  return 0;
}

std::string stickyEndpointsMapName(bool local, api::Protocol proto) {
  return std::string(local ? "local-" : "") + "sticky-endpoints-" + api::protocolName(proto);
}

std::vector<SetDecl> affinitySetDeclarations(Family f) {
  std::vector<SetDecl> decls;
  for (bool local : {false, true})
    for (api::Protocol p : kProtocols) {
      SetDecl d{stickySetName(local, p), {}, "",
                std::string(familyName(f)) + " saddr . numgen random mod 1 . numgen random mod 1"};
      d.dynamic = true;
      decls.push_back(std::move(d));
      decls.push_back({stickyEndpointsMapName(local, p), {}, "",
                       std::string("numgen random mod 1 . numgen random mod 1 : ") + familyName(f) + " daddr . " +
                           api::protocolName(p) + " dport"});
    }
  return decls;
}

namespace {

// <scope> . <port:slot>, as the sticky-endpoints map's key: in a rule, the constant written with
// numgen; `slot` may be numgen's random draw of a slot.
Expr endpointKey(const AffinityChain& a, Expr slot) { return ex::concat({ex::numgenRandom(1, a.scope), std::move(slot)}); }
uint32_t portSlot(const AffinityChain& a, uint32_t slot) { return (static_cast<uint32_t>(a.port) << 16) | slot; }

}  // namespace

Chain affinityChain(Family f, const AffinityChain& a) {
  const std::string set = stickySetName(a.local, a.proto);
  const std::string map = stickyEndpointsMapName(a.local, a.proto);
  const uint32_t n = a.endpoints;
  // The map yields address . port: the dnat needs the transport protocol matched in its rule.
  const Stmt proto = st::match(ex::meta("l4proto"), "==", ex::symbol(api::protocolName(a.proto)));
  auto dnatTo = [&](uint32_t slot) { return st::dnatMap(f, endpointKey(a, ex::numgenRandom(1, portSlot(a, slot))), map); };
  std::vector<Rule> rules;
  // A client that holds a slot goes back to its endpoint, and refreshes the entry.
  for (uint32_t i = 0; i < n; ++i) {
    const Expr key = clientSlotKey(f, a, i);
    rules.push_back(makeRule({proto, st::matchSet(key, set), st::setUpdate(key, a.seconds, set), dnatTo(i)}));
  }
  // A new client: slot i with probability 1/(n-i) once the ones before it were not drawn.
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<Stmt> stmts = {proto};
    if (i + 1 < n) stmts.push_back(st::match(ex::numgenRandom(n - i, 0), "==", ex::number(0)));
    stmts.push_back(st::setUpdate(clientSlotKey(f, a, i), a.seconds, set));
    stmts.push_back(dnatTo(i));
    rules.push_back(makeRule(stmts));
  }
  // Reached only when an update failed (the set holds its maximum of entries: the kernel ends
  // that rule): still every endpoint at 1/N, without stickiness, rather than no DNAT at all.
  rules.push_back(makeRule({proto, st::dnatMap(f, endpointKey(a, ex::numgenRandom(n, portSlot(a, 0))), map)},
                           "the set is full: no entry"));
  return Chain{a.name, std::nullopt, std::move(rules)};
}

std::vector<Element> affinityEndpointElements(const AffinityChain& a, const std::vector<EndpointChoice>& endpoints,
                                              const std::string& comment) {
  std::vector<Element> out;
  const std::string map = stickyEndpointsMapName(a.local, a.proto);
  for (uint32_t i = 0; i < endpoints.size(); ++i)
    out.push_back(mapElement(map, ex::concat({ex::number(a.scope), ex::number(portSlot(a, i))}),
                             ex::concat({ex::addr(endpoints[i].ip), ex::number(endpoints[i].port)}), comment));
  return out;
}

}  // namespace kpn::render
