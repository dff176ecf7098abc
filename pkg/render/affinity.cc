#include "pkg/render/affinity.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

std::string spacePrefix(KeySpace space) {
  std::string p = space == KeySpace::NodePort || space == KeySpace::LocalNodePort ? "nodeport-" : "";
  return localSubset(space) ? p + "local-" : p;
}

// ip saddr . <destination fields> . <slot>: the key of a client's slot at one destination.
Expr clientSlotKey(Family f, KeySpace space, api::Protocol proto, uint32_t slot) {
  std::vector<Expr> key = {ex::payload(familyName(f), "saddr")};
  for (Expr& e : destinationFields(f, space, proto)) key.push_back(std::move(e));
  key.push_back(ex::numgenRandom(1, slot));
  return ex::concat(key);
}

}  // namespace

std::string affinitySetName(KeySpace space, api::Protocol proto) {
  return spacePrefix(space) + "affinity-" + api::protocolName(proto);
}

std::string affinitySlotChainName(KeySpace space, api::Protocol proto, uint32_t slot, uint32_t seconds) {
  return spacePrefix(space) + "slot-" + api::protocolName(proto) + "-" + std::to_string(slot) + "-affinity-" +
         std::to_string(seconds) + "s";
}

std::vector<SetDecl> affinitySetDeclarations(Family f) {
  std::vector<SetDecl> decls;
  for (KeySpace s : kSpaces)
    for (api::Protocol p : kProtocols) {
      std::string spec = std::string(familyName(f)) + " saddr . ";
      for (const Expr& field : destinationFields(f, s, p)) spec += field.text + " . ";
      spec += "numgen random mod 1";
      SetDecl d{affinitySetName(s, p), {}, "", spec};
      d.dynamic = true;
      decls.push_back(std::move(d));
    }
  return decls;
}

Chain affinityPickChain(Family f, const Pick& pick) {
  std::vector<Rule> rules;
  std::vector<std::string> slots;
  const std::string set = affinitySetName(pick.space, pick.proto);
  for (uint32_t i = 0; i < pick.endpoints; ++i) {
    slots.push_back(affinitySlotChainName(pick.space, pick.proto, i, pick.affinitySeconds));
    rules.push_back(makeRule({st::matchSet(clientSlotKey(f, pick.space, pick.proto, i), set), st::goTo(slots.back())}));
  }
  rules.push_back(makeRule({st::numgenGoto(slots)}));
  return Chain{pick.chainName(), std::nullopt, std::move(rules)};
}

std::vector<Chain> affinitySlotChains(Family f, const Pick& pick) {
  std::vector<Chain> chains;
  const std::string set = affinitySetName(pick.space, pick.proto);
  for (uint32_t i = 0; i < pick.endpoints; ++i) {
    std::vector<Expr> dest = destinationFields(f, pick.space, pick.proto);
    dest.push_back(ex::numgenRandom(1, i));
    chains.push_back(Chain{affinitySlotChainName(pick.space, pick.proto, i, pick.affinitySeconds),
                           std::nullopt,
                           {makeRule({st::setUpdate(clientSlotKey(f, pick.space, pick.proto, i), pick.affinitySeconds, set)}),
                            makeRule({st::dnatMap(f, ex::concat(dest), backendsMapName(pick.space, pick.proto))})}});
  }
  return chains;
}

}  // namespace kpn::render
