#include "pkg/render/affinity.h"

#include <arpa/inet.h>

#include <cstring>

#include "pkg/render/fnv.h"
#include "pkg/render/pick_chains.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

// ip saddr . <scope> . <port:slot>: the key of a client's slot for a service port.
Expr clientSlotKey(Family f, const AffinityChain& a, uint32_t slot) {
  const uint32_t portSlot = (static_cast<uint32_t>(a.port) << 16) | slot;
  std::vector<Expr> parts = {ex::payload(familyName(f), "saddr")};
  for (uint32_t word : a.scope) parts.push_back(ex::numgenRandom(1, word));
  parts.push_back(ex::numgenRandom(1, portSlot));
  return ex::concat(parts);
}

// The scope's words of a family (affinityScope).
size_t scopeWords(Family f) { return f == Family::IPv4 ? 1 : 2; }

}  // namespace

std::string stickySetName(Family f, bool local, api::Protocol proto) {
  return std::string(local ? "local-" : "") + (f == Family::IPv4 ? "sticky-" : "sticky6-") + api::protocolName(proto);
}

std::string affinityChainName(const std::string& chainKey, bool local) {
  return std::string(local ? "local-" : "") + "affinity-" + chainKey;
}

std::vector<uint32_t> affinityScope(const std::string& clusterIP) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, clusterIP.c_str(), buf) == 1)
    return {(uint32_t(buf[0]) << 24) | (uint32_t(buf[1]) << 16) | (uint32_t(buf[2]) << 8) | buf[3]};
  if (inet_pton(AF_INET6, clusterIP.c_str(), buf) == 1) {
    const uint64_t h = fnv1a(std::string_view(reinterpret_cast<const char*>(buf), sizeof buf));
    return {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(h)};
  }
  return {};
}

std::vector<SetDecl> affinitySetDeclarations(Family f) {
  std::string key = std::string(familyName(f)) + " saddr";
  for (size_t i = 0; i <= scopeWords(f); ++i) key += " . numgen random mod 1";  // the scope, then port:slot
  std::vector<SetDecl> decls;
  for (bool local : {false, true})
    for (api::Protocol p : kProtocols) {
      SetDecl d{stickySetName(f, local, p), {}, "", key};
      d.dynamic = true;
      decls.push_back(std::move(d));
    }
  return decls;
}

Chain affinityChain(Family f, const AffinityChain& a) {
  const std::string set = stickySetName(f, a.local, a.proto);
  const auto n = static_cast<uint32_t>(a.endpoints.size());
  // A literal `dnat to address:port` needs the transport protocol matched in its own rule.
  const Stmt proto = st::match(ex::meta("l4proto"), "==", ex::symbol(api::protocolName(a.proto)));
  std::vector<Rule> rules;
  // A client that holds a slot goes back to its endpoint, and refreshes the entry.
  for (uint32_t i = 0; i < n; ++i) {
    const Expr key = clientSlotKey(f, a, i);
    rules.push_back(makeRule({proto, st::matchSet(key, set), st::setUpdate(key, a.seconds, set),
                              st::dnatTo(f, a.endpoints[i].ip, a.endpoints[i].port)}));
  }
  // A new client: endpoint i with probability 1/(n-i) once the ones before it were not drawn.
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<Stmt> stmts = {proto};
    if (i + 1 < n) stmts.push_back(st::match(ex::numgenRandom(n - i, 0), "==", ex::number(0)));
    stmts.push_back(st::setUpdate(clientSlotKey(f, a, i), a.seconds, set));
    stmts.push_back(st::dnatTo(f, a.endpoints[i].ip, a.endpoints[i].port));
    rules.push_back(makeRule(stmts));
  }
  // Reached only when an update failed (the set holds its maximum of entries: the kernel ends
  // that rule): still every endpoint at 1/N, without stickiness, rather than no DNAT at all.
  std::vector<std::pair<std::string, int32_t>> all;
  for (const services::EndpointChoice& ep : a.endpoints) all.emplace_back(ep.ip, ep.port);
  rules.push_back(makeRule({proto, st::dnatRandomOf(f, all)}, "the set is full: no entry"));
  return Chain{a.name, std::nullopt, std::move(rules)};
}

}  // namespace kpn::render
