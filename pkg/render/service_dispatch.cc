// A destination's endpoint slots and, when it needs one, its dispatch element; hairpin pairs.
#include <map>

#include "pkg/render/affinity.h"
#include "pkg/render/layout.h"
#include "pkg/render/service_paths.h"

namespace kpn::render {

using namespace kpn::nft;

Expr addressKey(const std::string& ip, api::Protocol proto, int32_t port) {
  return ex::concat({ex::addr(ip), ex::symbol(api::protocolName(proto)), ex::number(port)});
}

Expr nodePortKey(api::Protocol proto, int32_t nodePort) {
  return ex::concat({ex::symbol(api::protocolName(proto)), ex::number(nodePort)});
}

std::vector<Expr> addressSlotPrefix(const std::string& ip, int32_t port) { return {ex::addr(ip), ex::number(port)}; }
std::vector<Expr> nodePortSlotPrefix(int32_t nodePort) { return {ex::number(nodePort)}; }

std::string destinationId(Family f, KeySpace space, api::Protocol proto, const std::vector<Expr>& dest) {
  std::string id = std::string(familyName(f)) + " " + backendsMapName(space, proto) + "|";
  for (size_t i = 0; i < dest.size(); ++i) id += (i ? "," : "") + dest[i].json;
  return id;
}

namespace {

// Only a destination's first slot names its service port: the name is for people reading the
// table, and the other slots are its neighbours by key (destination . slot). A comment on every
// slot was most of a cold transaction's JSON objects (libnftables parses an element with a
// comment as two more objects) and a tenth of the kernel's memory per element.
std::string_view slotComment(size_t slot, const std::string& comment) {
  return slot == 0 ? std::string_view(comment) : std::string_view();
}

// "round-robin-ns/web/tcp/http/10.96.0.10" (IPv6 colons as dots, as upstream's chain names),
// "round-robin-ns/web/tcp/http/nodeport", with "local-" first for the local key spaces.
std::string roundRobinChainName(const PortPlan& p, KeySpace space, const std::vector<Expr>& dest) {
  std::string where = "nodeport";
  if (keyedByAddress(space)) {
    where = dest.front().text;
    for (char& c : where)
      if (c == ':') c = '.';
  }
  return std::string(localSubset(space) ? "local-" : "") + "round-robin-" + p.chainKey + "/" + where;
}

// Round-robin: the numgen inc counter belongs to its rule, so exact rotation per destination
// needs a rule, and so a chain, of its own (the one per-service object of this scheduler).
void roundRobinTo(PartBuilder& b, const PortPlan& p, KeySpace space, const std::vector<Expr>& dest,
                  const Expr& dispatchKey, const std::string& dispatchMap, uint32_t n) {
  const Family f = b.family;
  std::vector<Expr> key = destinationFields(f, space, p.sp.protocol);
  key.push_back(ex::numgenInc(n));
  Chain c{roundRobinChainName(p, space, dest), std::nullopt,
          {makeRule({st::dnatMap(f, ex::concat(key), backendsMapName(space, p.sp.protocol))})}};
  b.part.elements.push_back(verdictElement(dispatchMap, dispatchKey, c.name, p.comment));
  b.part.chains.push_back(std::move(c));
}

// The endpoints of `order` (slot order) as the endpoint set holds them.
std::vector<services::EndpointChoice> inSlotOrder(const EndpointOrder& order,
                                                  const std::vector<services::EndpointChoice>& set) {
  std::map<std::string, const services::EndpointChoice*> byValue;
  for (const services::EndpointChoice& ep : set) byValue[ex::concat({ex::addr(ep.ip), ex::number(ep.port)}).json] = &ep;
  std::vector<services::EndpointChoice> out;
  for (const std::string& value : order) out.push_back(*byValue.at(value));
  return out;
}

// Session affinity: every destination of the port goes to the port's chain of this endpoint set,
// whose entries are scoped to the service port (affinity.h).
void affinityTo(PartBuilder& b, const PortPlan& p, KeySpace space, const Expr& dispatchKey,
                const std::string& dispatchMap, const EndpointOrder& order) {
  // Its key space's pool all the same: the pick rules must bind the map while it is empty.
  b.picks.insert(Pick{space, p.sp.protocol, 1});
  const bool local = p.isLocal(order);
  const std::string name = affinityChainName(p.chainKey, local);
  if (b.affinityChains.insert(name).second)
    b.part.chains.push_back(affinityChain(
        b.family, AffinityChain{name, p.sp.protocol, local, p.affinityScope, p.sp.port, p.affinitySeconds,
                                inSlotOrder(order, local ? p.eps.local : p.eps.cluster)}));
  b.part.elements.push_back(verdictElement(dispatchMap, dispatchKey, name, p.comment));
}

}  // namespace

void dispatchTo(PartBuilder& b, const PortPlan& p, KeySpace space, const std::vector<Expr>& dest,
                const Expr& dispatchKey, const std::string& dispatchMap, const EndpointOrder& order) {
  const SetName map = backendsMapName(space, p.sp.protocol);  // looked up once, not per slot
  const bool local = p.isLocal(order);
  const HashTable* table = local ? p.localTable : p.allTable;
  Pick pick{space, p.sp.protocol, static_cast<uint32_t>(order.size()), table != nullptr};
  // Slot i of the destination holds `endpoint` (its JSON, copied once: into the element's block).
  auto slot = [&](size_t i, const std::string& endpoint) {
    b.part.elements.emplace_back(map, slotKey(dest, i).json, endpoint, slotComment(i, p.comment));
  };
  if (table) {
    // The slots are the endpoint set's lookup table (source_hash_table.h), not its order.
    pick.endpoints = static_cast<uint32_t>(table->size());
    for (size_t i = 0; i < table->size(); ++i) slot(i, table->at(i));
  } else if (p.leastConn && order.size() > 1) {
    // The slots are the chosen endpoints (least_conn.h), counted by the shared pick rules.
    const std::vector<std::string> slots = leastConnSlots(order, local ? p.localChosen : p.allChosen);
    pick.endpoints = static_cast<uint32_t>(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) slot(i, slots[i]);
  } else {
    for (size_t i = 0; i < order.size(); ++i) slot(i, order[i]);
  }
  if (p.affinitySeconds) return affinityTo(b, p, space, dispatchKey, dispatchMap, order);
  if (p.scheduler == services::Scheduler::RoundRobin && order.size() > 1)
    return roundRobinTo(b, p, space, dest, dispatchKey, dispatchMap, static_cast<uint32_t>(order.size()));
  b.picks.insert(pick);
  if (!pick.counted()) {
    b.part.elements.push_back(verdictElement(dispatchMap, dispatchKey, pick.chainName(), p.comment));
    return;
  }
  // Counted by its slots alone (pick_chains.h): no dispatch element. Every eTP=Local destination is in its local map (the node's own traffic is marked through it);
  // `continue` hands outside traffic on to the local entry chain.
  if (localSubset(space)) verdictFor(b, p, dispatchMap, dispatchKey, continueVerdict());
}

void verdictFor(PartBuilder& b, const PortPlan& p, const std::string& map, const Expr& key, const Expr& verdict) {
  b.part.elements.push_back(mapElement(map, key, verdict, p.comment));
}

void addHairpins(PartBuilder& b, const std::vector<services::EndpointChoice>& eps) {
  // Only an endpoint whose own traffic passes this node can hairpin here: a remote endpoint's
  // pair would be dead weight (100k of the 240k operations of a 10k x 10 cold sync).
  for (const services::EndpointChoice& ep : eps)
    if (ep.hairpinHere && b.hairpins.insert(ep.ip).second)
      b.part.elements.push_back(setElement(kHairpin, ex::concat({ex::addr(ep.ip), ex::addr(ep.ip)})));
}

}  // namespace kpn::render
