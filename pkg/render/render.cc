#include "pkg/render/render.h"

#include <glog/logging.h>
#include <rapidjson/document.h>

#include <map>
#include <set>

#include "pkg/render/endpoints.h"
#include "pkg/render/layout.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

const Family kFamilies[] = {Family::IPv4, Family::IPv6};

const char* addressTypeOf(Family f) { return f == Family::IPv4 ? "IPv4" : "IPv6"; }

std::string ownerOf(const std::string& serviceKey) { return "svc " + serviceKey; }
const char* kBaseOwner = "base";

std::string slotOwner(Family f, const std::string& chain) { return std::string(familyName(f)) + " " + chain; }

}  // namespace

bool serviceIsProxied(const api::Service& svc, const NodeConfig& cfg) {
  if (svc.headless || svc.type == "ExternalName") return false;
  auto proxyName = svc.meta.labels.find("service.kubernetes.io/service-proxy-name");
  if (proxyName != svc.meta.labels.end() && proxyName->second != cfg.serviceProxyName) return false;
  return !svc.clusterIPs.empty();
}

PartPtr renderServicePart(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                          const NodeConfig& cfg, Family family, BackendSlots& slots) {
  std::string clusterIP;
  for (const auto& ip : svc.clusterIPs) {
    auto f = net::familyOf(ip);
    if (f && toNftFamily(*f) == family) {
      clusterIP = ip;
      break;
    }
  }
  if (clusterIP.empty()) return nullptr;

  auto part = std::make_shared<Part>();
  std::set<std::string> seenKeys, hairpins;
  part->elements.push_back(setElement(kClusterIPs, ex::addr(clusterIP), svc.meta.ns + "/" + svc.meta.name));
  for (const api::ServicePort& sp : svc.ports) {
    const char* proto = api::protocolName(sp.protocol);
    Expr key = ex::concat({ex::addr(clusterIP), ex::symbol(proto), ex::number(sp.port)});
    if (!seenKeys.insert(key.json).second) continue;  // a duplicate port: the API would have refused it
    std::string chain = serviceChainName(svc, sp);
    std::string comment = servicePortComment(svc, sp);
    auto eps = usableEndpoints(sp, slices, addressTypeOf(family), cfg.nodeName);
    if (eps.empty()) {
      slots.release(slotOwner(family, chain));
      part->elements.push_back(verdictElement(kNoEndpointServices, key, kRejectChain, comment));
      continue;
    }
    std::map<std::string, Expr> values;  // element value json -> expression
    std::vector<std::string> valueJson;
    for (const auto& ep : eps) {
      Expr v = ex::concat({ex::addr(ep.ip), ex::number(ep.port)});
      valueJson.push_back(v.json);
      values.emplace(v.json, std::move(v));
      if (hairpins.insert(ep.ip).second)
        part->elements.push_back(setElement(kHairpin, ex::concat({ex::addr(ep.ip), ex::addr(ep.ip)})));
    }
    const Slot& slot = slots.place(slotOwner(family, chain), backendsMapName(sp.protocol, chain, cfg.backendShards), valueJson);
    for (size_t i = 0; i < slot.order.size(); ++i)
      part->elements.push_back(mapElement(slot.map, ex::number(slot.base + i), values.at(slot.order[i])));
    part->chains.push_back(Chain{chain, std::nullopt,
                                 {makeRule({st::match(ex::meta("l4proto"), "==", ex::symbol(proto)),
                                            st::dnatMap(family, ex::numgenRandom(slot.order.size(), slot.base), slot.map)},
                                           comment)}});
    part->elements.push_back(verdictElement(kServiceIPs, key, chain, comment));
  }
  nft::shrinkToFit(*part);
  return part;
}

Renderer::Renderer(NodeConfig cfg) : cfg_(std::move(cfg)) {}

Ruleset Renderer::skeleton() const {
  Ruleset rs;
  for (Family f : kFamilies) rs.tables.push_back(Table{f, kTableName, tableDeclarations(f, cfg_), {}});
  return rs;
}

const Ruleset& Renderer::render(const state::ClusterState& st, const std::set<std::string>* changed) {
  bool incremental = changed && last_.tables.size() == 2;
  if (!incremental) {
    last_.tables.clear();
    for (Family f : kFamilies) {
      Table t{f, kTableName, tableDeclarations(f, cfg_), {}};
      t.parts[kBaseOwner] = renderBasePart(f, cfg_);
      last_.tables.push_back(std::move(t));
    }
  }
  std::vector<std::string> keys;  // sorted: allocation order must not depend on how we got here
  if (incremental) keys.assign(changed->begin(), changed->end());
  else
    for (const auto& [key, svc] : st.services) keys.push_back(key);

  auto proxied = [&](const std::string& key) -> const api::Service* {
    auto it = st.services.find(key);
    return it != st.services.end() && serviceIsProxied(*it->second, cfg_) ? it->second.get() : nullptr;
  };

  // Pass 1: release the backend ranges of service ports that are gone, in one canonical order, so
  // an incremental render and a from-scratch one reuse freed ranges identically.
  std::set<std::string> wanted, release;
  for (const std::string& key : keys)
    if (const api::Service* svc = proxied(key))
      for (Family f : kFamilies)
        for (const auto& sp : svc->ports) wanted.insert(slotOwner(f, serviceChainName(*svc, sp)));
  if (incremental) {
    for (const Table& t : last_.tables)
      for (const std::string& key : keys) {
        auto old = t.parts.find(ownerOf(key));
        if (old == t.parts.end()) continue;
        for (const Chain& c : old->second->chains)
          if (!wanted.count(slotOwner(t.family, c.name))) release.insert(slotOwner(t.family, c.name));
      }
  } else {
    for (const auto& [owner, slot] : slots_.slots())
      if (!wanted.count(owner)) release.insert(owner);
  }
  for (const std::string& owner : release) slots_.release(owner);

  // Pass 2: render.
  touched_.clear();
  lastWasIncremental_ = incremental;
  for (const std::string& key : keys) {
    if (incremental) touched_.insert(ownerOf(key));
    const api::Service* svc = proxied(key);
    std::vector<const api::EndpointSlice*> slices;
    if (svc) {
      auto sl = st.slicesByService.find(key);
      if (sl != st.slicesByService.end())
        for (const auto& [name, slice] : sl->second) slices.push_back(slice.get());
    }
    for (Table& t : last_.tables) {
      PartPtr part = svc ? renderServicePart(*svc, slices, cfg_, t.family, slots_) : nullptr;
      if (part) t.parts[ownerOf(key)] = std::move(part);
      else t.parts.erase(ownerOf(key));
    }
  }
  return last_;
}

void Renderer::adoptSlots(const std::vector<ListedTable>& kernel) {
  for (size_t i = 0; i < kernel.size() && i < 2; ++i) {
    Family f = kFamilies[i];
    for (const auto& [name, chain] : kernel[i].chains) {
      if (name.rfind("service-", 0) != 0 || chain.rules.size() != 1) continue;
      // [{"match":...},{"dnat":{"family":..,"addr":{"map":{"key":{"numgen":{..,"mod":N,"offset":B}},"data":"@M"}}}}]
      rapidjson::Document d;
      d.Parse(chain.rules[0].exprJson.c_str());
      if (d.HasParseError() || !d.IsArray() || d.Size() != 2 || !d[1].IsObject() || !d[1].HasMember("dnat")) continue;
      const auto& dn = d[1]["dnat"];
      if (!dn.HasMember("addr") || !dn["addr"].IsObject() || !dn["addr"].HasMember("map")) continue;
      const auto& m = dn["addr"]["map"];
      if (!m.HasMember("key") || !m["key"].IsObject() || !m["key"].HasMember("numgen") || !m.HasMember("data") ||
          !m["data"].IsString())
        continue;
      const auto& ng = m["key"]["numgen"];
      if (!ng.HasMember("mod") || !ng.HasMember("offset") || !ng["mod"].IsUint() || !ng["offset"].IsUint()) continue;
      std::string map = std::string(m["data"].GetString()).substr(1);
      uint32_t mod = ng["mod"].GetUint(), base = ng["offset"].GetUint();
      auto set = kernel[i].sets.find(map);
      if (set == kernel[i].sets.end()) continue;
      Slot slot{map, base, BackendSlots::capacityFor(mod), {}};
      bool complete = true;
      for (uint32_t k = 0; k < mod && complete; ++k) {
        auto e = set->second.elements.find(std::to_string(base + k));
        if (e == set->second.elements.end()) complete = false;
        else slot.order.push_back(e->second);
      }
      if (complete) slots_.adopt(slotOwner(f, name), std::move(slot));
    }
  }
}

}  // namespace kpn::render
