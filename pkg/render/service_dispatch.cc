// A destination's endpoint slots and its dispatch element; hairpin pairs.
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

std::string destinationId(KeySpace space, api::Protocol proto, const std::vector<Expr>& dest) {
  std::string id = backendsMapName(space, proto) + "|";
  for (size_t i = 0; i < dest.size(); ++i) id += (i ? "," : "") + dest[i].json;
  return id;
}

void dispatchTo(PartBuilder& b, const PortPlan& p, KeySpace space, const std::vector<Expr>& dest,
                const Expr& dispatchKey, const std::string& dispatchMap, const EndpointOrder& order) {
  const std::string map = backendsMapName(space, p.sp.protocol);
  for (size_t i = 0; i < order.size(); ++i)
    b.part.elements.push_back(mapElement(map, slotKey(dest, i), Expr{order[i], ""}, p.comment));
  Pick pick{space, p.sp.protocol, static_cast<uint32_t>(order.size())};
  b.part.elements.push_back(verdictElement(dispatchMap, dispatchKey, pick.chainName(), p.comment));
  b.picks.insert(pick);
}

void verdictFor(PartBuilder& b, const PortPlan& p, const std::string& map, const Expr& key, const Expr& verdict) {
  b.part.elements.push_back(mapElement(map, key, verdict, p.comment));
}

void addHairpins(PartBuilder& b, const std::vector<EndpointChoice>& eps) {
  // Only an endpoint whose own traffic passes this node can hairpin here: a remote endpoint's
  // pair would be dead weight (100k of the 240k operations of a 10k x 10 cold sync).
  for (const EndpointChoice& ep : eps)
    if (ep.hairpinHere && b.hairpins.insert(ep.ip).second)
      b.part.elements.push_back(setElement(kHairpin, ex::concat({ex::addr(ep.ip), ex::addr(ep.ip)})));
}

}  // namespace kpn::render
