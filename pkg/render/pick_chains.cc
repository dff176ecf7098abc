#include "pkg/render/pick_chains.h"

#include "pkg/render/source_hash_table.h"

namespace kpn::render {

using namespace kpn::nft;

const std::vector<api::Protocol> kProtocols = {api::Protocol::TCP, api::Protocol::UDP, api::Protocol::SCTP};
const std::vector<KeySpace> kSpaces = {KeySpace::Address, KeySpace::LocalAddress, KeySpace::NodePort,
                                       KeySpace::LocalNodePort};

bool keyedByAddress(KeySpace s) { return s == KeySpace::Address || s == KeySpace::LocalAddress; }
bool localSubset(KeySpace s) { return s == KeySpace::LocalAddress || s == KeySpace::LocalNodePort; }

std::vector<Expr> destinationFields(Family f, KeySpace s, api::Protocol proto) {
  std::vector<Expr> fields;
  if (keyedByAddress(s)) fields.push_back(ex::payload(familyName(f), "daddr"));
  // `tcp dport`, not `th dport`: nft 1.0.6 JSON refuses `ip daddr . th dport` inside a dnat map
  // ("conflicting protocols specified: ip vs. th"), so each protocol has its own maps and chains.
  fields.push_back(ex::payload(api::protocolName(proto), "dport"));
  return fields;
}

std::string backendsMapName(KeySpace space, api::Protocol proto) {
  std::string name = space == KeySpace::NodePort || space == KeySpace::LocalNodePort ? "nodeport-" : "";
  if (localSubset(space)) name += "local-";
  return name + "backends-" + api::protocolName(proto);
}

std::string pickChainName(KeySpace space, api::Protocol proto, uint32_t endpoints) {
  std::string name = space == KeySpace::NodePort || space == KeySpace::LocalNodePort ? "nodeport-" : "";
  name += "pick-";
  if (localSubset(space)) name += "local-";
  return name + api::protocolName(proto) + "-" + std::to_string(endpoints);
}

std::string protocolPickChainName(KeySpace space, api::Protocol proto) {
  std::string name = space == KeySpace::NodePort || space == KeySpace::LocalNodePort ? "nodeport-" : "";
  name += "pick-";
  if (localSubset(space)) name += "local-";
  return name + api::protocolName(proto);
}

std::string entryChainName(KeySpace space) {
  std::string name = space == KeySpace::NodePort || space == KeySpace::LocalNodePort ? "nodeport-pick" : "pick";
  return localSubset(space) ? name + "-local" : name;
}

bool Pick::counted() const { return !sourceHash && endpoints <= kPooledCounts; }

std::string Pick::chainName() const {
  std::string name = pickChainName(space, proto, endpoints);
  if (sourceHash) name.insert(name.find("pick-") + 5, "hash-");  // "pick-hash-tcp-251"
  return name;
}

Chain pickChain(Family f, const Pick& pick) {
  std::vector<Expr> key = destinationFields(f, pick.space, pick.proto);
  if (pick.sourceHash) key.push_back(ex::jhash(ex::payload(familyName(f), "saddr"), pick.endpoints, kSourceHashSeed));
  else key.push_back(ex::numgenRandom(pick.endpoints, 0));
  // nft lists the `meta l4proto` dependency of `tcp dport` as implied, so the rule has none.
  return Chain{pick.chainName(),
               std::nullopt,
               {makeRule({st::dnatMap(f, ex::concat(key), backendsMapName(pick.space, pick.proto))})}};
}

PickLayout declaredPicks(const std::map<Pick, int>& users) {
  PickLayout out;
  for (const auto& [pick, n] : users) {
    if (n <= 0) continue;
    out.pools.emplace(pick.space, pick.proto);
    if (!pick.counted()) out.chains.insert(pick);
  }
  return out;
}

Chain protocolPickChain(Family f, const Pool& pool) {
  const auto& [space, proto] = pool;
  const std::vector<Expr> dest = destinationFields(f, space, proto);
  const std::string map = backendsMapName(space, proto);
  Chain c{protocolPickChainName(space, proto), std::nullopt, {}};
  for (uint32_t n = 1; n <= kPooledCounts; ++n) {
    // Rules n-1 and before did not fire: slots 0..n-1 exist. Slot n missing: n endpoints.
    std::vector<Expr> slot = dest, key = dest;
    slot.push_back(ex::numgenRandom(1, n));
    key.push_back(ex::numgenRandom(n, 0));
    c.rules.push_back(makeRule({st::matchSet(ex::concat(slot), map, true), st::dnatMap(f, ex::concat(key), map)},
                               std::to_string(n) + (n == 1 ? " endpoint" : " endpoints")));
  }
  return c;
}

Chain entryChain(Family f, KeySpace space, const std::set<Pool>& pools) {
  Chain c{entryChainName(space), std::nullopt, {}};
  for (api::Protocol proto : kProtocols) {
    if (!pools.count({space, proto})) continue;
    // Slot 0 in the backends map: a destination with endpoints (one lookup for all other traffic).
    // Destinations of the dispatch maps have slots too, but their lookup came first and went.
    std::vector<Expr> key = destinationFields(f, space, proto);
    key.push_back(ex::numgenRandom(1, 0));
    c.rules.push_back(makeRule({st::matchSet(ex::concat(key), backendsMapName(space, proto)),
                                st::goTo(protocolPickChainName(space, proto))}));
  }
  return c;
}

std::vector<SetDecl> backendsMapDeclarations(Family f) {
  std::vector<SetDecl> decls;
  for (KeySpace s : kSpaces)
    for (api::Protocol p : kProtocols) {
      std::string spec;
      for (const Expr& field : destinationFields(f, s, p)) spec += field.text + " . ";
      spec += "numgen random mod 1 : " + std::string(familyName(f)) + " daddr . " + api::protocolName(p) + " dport";
      decls.push_back({backendsMapName(s, p), {}, "", spec});
    }
  return decls;
}

std::vector<std::string> backendsMapNames() {
  std::vector<std::string> names;
  for (KeySpace s : kSpaces)
    for (api::Protocol p : kProtocols) names.push_back(backendsMapName(s, p));
  return names;
}

Expr slotKey(const std::vector<Expr>& dest, uint32_t slot) {
  std::vector<Expr> parts = dest;
  parts.push_back(ex::number(slot));
  return ex::concat(parts);
}

}  // namespace kpn::render
