#include "pkg/render/render.h"

#include <glog/logging.h>
#include <rapidjson/document.h>

#include <map>
#include <optional>
#include <set>

#include "pkg/render/comment.h"
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

// The backend ranges a chain of a service's Part may hold: its own, and for external-<...> the
// local-<...> range whose rule ends it (eTP=Local without a local- chain).
std::vector<std::string> rangeOwners(const std::string& chain) {
  static const std::string kExternal = "external-";
  if (chain.compare(0, kExternal.size(), kExternal) == 0) return {chain, "local-" + chain.substr(kExternal.size())};
  return {chain};
}

}  // namespace

bool serviceIsProxied(const api::Service& svc, const NodeConfig& cfg) {
  if (svc.headless || svc.type == "ExternalName") return false;
  // Any value of the label (the empty one too) hands the service to another proxy, as upstream's
  // label selector does; the sources filter these out already.
  if (svc.meta.labels.count("service.kubernetes.io/service-proxy-name")) return false;
  return !svc.clusterIPs.empty();
}

PartPtr renderServicePart(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                          const NodeConfig& cfg, Family family, BackendSlots& slots, const FamilyEnvironment& env,
                          const DestinationClaims* claims) {
  auto inFamily = [&](const std::string& ip) {
    auto f = net::familyOf(ip);
    return f && toNftFamily(*f) == family;
  };
  std::string clusterIP;
  for (const auto& ip : svc.clusterIPs)
    if (inFamily(ip)) {
      clusterIP = ip;
      break;
    }
  if (clusterIP.empty()) return nullptr;  // as upstream: a family without a ClusterIP has no service

  const std::string svcKey = state::serviceKey(svc.meta.ns, svc.meta.name);
  const bool externalLocal = svc.externalTrafficPolicy == "Local";
  const bool internalLocal = svc.internalTrafficPolicy == "Local";
  const uint32_t mark = cfg.masqueradeMark;
  // The LB IPs first: an address that is both an LB IP and an external IP gets the firewall.
  std::vector<std::pair<std::string, bool>> externalAddrs;  // (address, is an LB IP)
  for (const auto& ip : loadBalancerVIPs(svc))
    if (inFamily(ip)) externalAddrs.emplace_back(ip, true);
  for (const auto& ip : svc.externalIPs)
    if (inFamily(ip)) externalAddrs.emplace_back(ip, false);
  std::vector<net::Cidr> ranges;
  for (const auto& text : svc.loadBalancerSourceRanges) {
    auto c = net::parseCidr(text);
    if (c && toNftFamily(c->family) == family) ranges.push_back(*c);
  }
  // An unreadable range closes the firewall to every source (no return rule at all), rather
  // than leaving the service open to all, or to more than its owner listed.
  if (svc.sourceRangeUnreadable) ranges.clear();
  const bool firewalled = !ranges.empty() || svc.sourceRangeUnreadable;

  auto owns = [&](const std::string& dest) { return !claims || claims->owns(svcKey, dest); };
  auto lost = [&](const std::string& what, const std::string& dest) {
    LOG(WARNING) << "Service " << svcKey << ": " << what << " is already used by Service " << claims->owner(dest)
                 << " (the older one keeps it); not programmed for this service";
  };
  // A nodePort is one claim for both families: say so once, in the service's first family.
  const bool firstFamily = inFamily(svc.clusterIPs.front());

  auto part = std::make_shared<Part>();
  std::set<std::string> seen, hairpins;
  part->elements.push_back(setElement(kClusterIPs, ex::addr(clusterIP), boundedComment(svc.meta.ns + "/" + svc.meta.name)));
  bool firewallUsed = false;
  const Expr kDrop{"{\"drop\":null}", "drop"};
  auto dropElement = [&](const char* set, Expr key, const std::string& comment) {
    return mapElement(set, std::move(key), kDrop, comment);
  };

  for (const api::ServicePort& sp : svc.ports) {
    const char* proto = api::protocolName(sp.protocol);
    auto addrKey = [&](const std::string& ip) { return ex::concat({ex::addr(ip), ex::symbol(proto), ex::number(sp.port)}); };
    std::string clusterDest = ipDestination(clusterIP, sp.protocol, sp.port);
    if (!seen.insert(clusterDest).second) continue;  // a duplicate port: the API would have refused it
    const std::string chain = serviceChainName(svc, sp), localChain = localChainName(svc, sp),
                      externalChain = externalChainName(svc, sp), comment = servicePortComment(svc, sp);
    EndpointSets eps = categorizeEndpoints(sp, slices, addressTypeOf(family), cfg.nodeName);
    const bool hasEndpoints = !eps.cluster.empty() || !eps.local.empty();

    // External destinations this service holds: LB IPs and external IPs, and the nodePort.
    std::vector<Expr> externalKeys, firewallKeys;
    for (const auto& [ip, isVIP] : externalAddrs) {
      std::string dest = ipDestination(ip, sp.protocol, sp.port);
      if (!seen.insert(dest).second) continue;
      if (!owns(dest)) {
        lost(std::string(isVIP ? "LoadBalancer IP " : "external IP ") + ip + " port " + proto + "/" +
                 std::to_string(sp.port),
             dest);
        continue;
      }
      externalKeys.push_back(addrKey(ip));
      if (isVIP && firewalled) firewallKeys.push_back(externalKeys.back());
    }
    std::optional<Expr> nodePortKey;
    if (sp.nodePort > 0 && seen.insert(nodePortDestination(sp.protocol, sp.nodePort)).second) {
      std::string dest = nodePortDestination(sp.protocol, sp.nodePort);
      if (owns(dest)) nodePortKey = ex::concat({ex::symbol(proto), ex::number(sp.nodePort)});
      else if (firstFamily) lost(std::string("nodePort ") + proto + "/" + std::to_string(sp.nodePort), dest);
    }
    const bool external = !externalKeys.empty() || nodePortKey;

    // The rules that pick an endpoint: all usable endpoints (service-), this node's (local-). Each
    // keeps a sticky range of backend slots, owned by the chain name, and exists only when used.
    auto dnatRule = [&](const std::string& owner, const std::vector<EndpointChoice>& chosen) {
      std::map<std::string, Expr> values;  // element value json -> expression
      std::vector<std::string> valueJson;
      for (const auto& ep : chosen) {
        Expr v = ex::concat({ex::addr(ep.ip), ex::number(ep.port)});
        valueJson.push_back(v.json);
        values.emplace(v.json, std::move(v));
        if (hairpins.insert(ep.ip).second)
          part->elements.push_back(setElement(kHairpin, ex::concat({ex::addr(ep.ip), ex::addr(ep.ip)})));
      }
      const Slot& slot = slots.place(slotOwner(family, owner), backendsMapName(sp.protocol, owner, cfg.backendShards), valueJson);
      for (size_t i = 0; i < slot.order.size(); ++i)
        part->elements.push_back(mapElement(slot.map, ex::number(slot.base + i), values.at(slot.order[i])));
      return makeRule({st::match(ex::meta("l4proto"), "==", ex::symbol(proto)),
                       st::dnatMap(family, ex::numgenRandom(slot.order.size(), slot.base), slot.map)},
                      comment);
    };
    const bool usesServiceChain = !eps.cluster.empty() && (!internalLocal || external);
    const bool usesLocalEndpoints = !eps.local.empty() && (internalLocal || (externalLocal && external));
    // A local- chain only when the ClusterIP needs it (iTP=Local); for eTP=Local alone the rule
    // ends external-<...> (one chain less per service: every chain costs each commit).
    const bool usesLocalChain = usesLocalEndpoints && internalLocal;
    if (usesServiceChain) part->chains.push_back(Chain{chain, std::nullopt, {dnatRule(chain, eps.cluster)}});
    else slots.release(slotOwner(family, chain));
    std::optional<Rule> localRule;
    if (usesLocalEndpoints) localRule = dnatRule(localChain, eps.local);
    else slots.release(slotOwner(family, localChain));
    if (usesLocalChain) part->chains.push_back(Chain{localChain, std::nullopt, {*localRule}});

    // ClusterIP: internal traffic policy. Nothing usable at all: reject; Local and nothing here: drop.
    if (!owns(clusterDest)) {
      lost("ClusterIP port " + std::string(proto) + "/" + std::to_string(sp.port), clusterDest);
    } else if (internalLocal ? !eps.local.empty() : hasEndpoints) {
      part->elements.push_back(verdictElement(kServiceIPs, addrKey(clusterIP), internalLocal ? localChain : chain, comment));
    } else if (hasEndpoints) {
      part->elements.push_back(dropElement(kNoEndpointServices, addrKey(clusterIP), comment));
    } else {
      part->elements.push_back(verdictElement(kNoEndpointServices, addrKey(clusterIP), kRejectChain, comment));
    }

    // NodePort, external IPs, LB IPs: external traffic policy, through external-<...>.
    if (external && !hasEndpoints) {
      for (const Expr& k : externalKeys) part->elements.push_back(verdictElement(kNoEndpointServices, k, kRejectChain, comment));
      if (nodePortKey) part->elements.push_back(verdictElement(kNoEndpointNodePorts, *nodePortKey, kRejectChain, comment));
    } else if (external && !externalLocal) {
      // eTP=Cluster: all endpoints; the base rules masquerade what is in @masquerade-*.
      for (const Expr& k : externalKeys) {
        part->elements.push_back(verdictElement(kServiceIPs, k, chain, comment));
        part->elements.push_back(setElement(kMasqueradeIPs, k));
      }
      if (nodePortKey) {
        part->elements.push_back(verdictElement(kServiceNodePorts, *nodePortKey, chain, comment));
        part->elements.push_back(setElement(kMasqueradeNodePorts, *nodePortKey));
      }
    } else if (external) {
      // eTP=Local: pods and the node itself reach the service through all endpoints (upstream's
      // short-circuit); only traffic from outside keeps its source and stays on this node.
      std::vector<Rule> rules;
      if (!eps.cluster.empty()) {
        if (!env.localKind.empty())
          rules.push_back(makeRule({localTrafficMatch(family, env, false), st::goTo(chain)}, "short-circuit pod traffic"));
        rules.push_back(makeRule({st::match(ex::fib("saddr", "type"), "==", ex::symbol("local")),
                                  st::markSet(ex::bitOr(ex::meta("mark"), mark)), st::goTo(chain)},
                                 "masquerade and short-circuit node traffic"));
      }
      if (usesLocalChain) rules.push_back(makeRule({st::goTo(localChain)}));
      else if (localRule) rules.push_back(*localRule);
      part->chains.push_back(Chain{externalChain, std::nullopt, std::move(rules)});
      for (const Expr& k : externalKeys) part->elements.push_back(verdictElement(kServiceIPs, k, externalChain, comment));
      if (nodePortKey) part->elements.push_back(verdictElement(kServiceNodePorts, *nodePortKey, externalChain, comment));
      if (eps.local.empty()) {
        // Outside traffic falls through external-<...> undnatted and is dropped here (not rejected).
        for (const Expr& k : externalKeys) part->elements.push_back(dropElement(kNoEndpointServices, k, comment));
        if (nodePortKey) part->elements.push_back(dropElement(kNoEndpointNodePorts, *nodePortKey, comment));
      }
    }
    for (const Expr& k : firewallKeys) {
      part->elements.push_back(verdictElement(kFirewallIPs, k, firewallChainName(svc), comment));
      firewallUsed = true;
    }
  }

  if (firewallUsed) {
    // Allowed sources return to the pre-DNAT base chain; everything else is dropped.
    Expr src = ex::payload(familyName(family), "saddr");
    std::vector<Rule> rules;
    bool nodeInRange = false;
    for (const auto& r : ranges) {
      rules.push_back(makeRule({st::match(src, "==", ex::prefix(r.address, r.prefixLen)), st::ret()}));
      for (const auto& n : env.nodeIPs) nodeInRange = nodeInRange || net::contains(r, n);
    }
    // The node reaching its own LB IP may use the VIP as source (upstream does the same).
    if (nodeInRange)
      for (const auto& [ip, isVIP] : externalAddrs)
        if (isVIP) rules.push_back(makeRule({st::match(src, "==", ex::addr(ip)), st::ret()}));
    rules.push_back(makeRule({st::drop()}, "source not in loadBalancerSourceRanges"));
    part->chains.push_back(Chain{firewallChainName(svc), std::nullopt, std::move(rules)});
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
  Environment env = deriveEnvironment(cfg_, st.node.get(), st.serviceCIDRs, host_);
  const bool envChanged = !haveEnv_ || !(env == env_);
  const bool servicesSeeIt = !haveEnv_ || !env.sameForServices(env_);
  if (envChanged)
    for (const auto& w : env.warnings) LOG(WARNING) << w;
  env_ = std::move(env);
  haveEnv_ = true;

  bool incremental = changed && last_.tables.size() == 2 && !servicesSeeIt;
  touched_.clear();
  lastWasIncremental_ = incremental;
  if (!incremental) {
    last_.tables.clear();
    for (Family f : kFamilies) {
      Table t{f, kTableName, tableDeclarations(f, cfg_), {}};
      t.parts[kBaseOwner] = renderBasePart(f, cfg_, env_.of(f));
      last_.tables.push_back(std::move(t));
    }
  } else if (envChanged) {
    for (Table& t : last_.tables) t.parts[kBaseOwner] = renderBasePart(t.family, cfg_, env_.of(t.family));
    touched_.insert(kBaseOwner);
  }

  auto proxied = [&](const std::string& key) -> const api::Service* {
    auto it = st.services.find(key);
    return it != st.services.end() && serviceIsProxied(*it->second, cfg_) ? it->second.get() : nullptr;
  };

  // Contested destinations first: a change may hand a nodePort or an external IP to another
  // service, which must then be rendered too.
  std::set<std::string> keySet;
  if (incremental) {
    keySet.insert(changed->begin(), changed->end());
    std::set<std::string> affected;
    for (const std::string& key : *changed) claims_.update(key, proxied(key), &affected);
    keySet.insert(affected.begin(), affected.end());
  } else {
    claims_.clear();
    for (const auto& [key, svc] : st.services) {
      keySet.insert(key);
      claims_.update(key, proxied(key), nullptr);
    }
  }
  std::vector<std::string> keys(keySet.begin(), keySet.end());  // sorted: allocation order must not depend on how we got here

  // Pass 1: release the backend ranges of service ports that are gone, in one canonical order, so
  // an incremental render and a from-scratch one reuse freed ranges identically.
  std::set<std::string> wanted, release;
  for (const std::string& key : keys)
    if (const api::Service* svc = proxied(key))
      for (Family f : kFamilies)
        for (const auto& sp : svc->ports) {
          wanted.insert(slotOwner(f, serviceChainName(*svc, sp)));
          wanted.insert(slotOwner(f, localChainName(*svc, sp)));
        }
  if (incremental) {
    for (const Table& t : last_.tables)
      for (const std::string& key : keys) {
        auto old = t.parts.find(ownerOf(key));
        if (old == t.parts.end()) continue;
        for (const Chain& c : old->second->chains)
          for (const std::string& owner : rangeOwners(c.name))
            if (!wanted.count(slotOwner(t.family, owner))) release.insert(slotOwner(t.family, owner));
      }
  } else {
    for (const auto& [owner, slot] : slots_.slots())
      if (!wanted.count(owner)) release.insert(owner);
  }
  for (const std::string& owner : release) slots_.release(owner);

  // Pass 2: render.
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
      PartPtr part = svc ? renderServicePart(*svc, slices, cfg_, t.family, slots_, env_.of(t.family), &claims_) : nullptr;
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
      // service-<...> and local-<...>: one dnat rule over a range of a backends map; external-<...>
      // of an eTP=Local service ends with the local- range's rule.
      std::string owner;
      const ListedRule* rule = nullptr;
      if ((name.rfind("service-", 0) == 0 || name.rfind("local-", 0) == 0) && chain.rules.size() == 1) {
        owner = name, rule = &chain.rules[0];
      } else if (name.rfind("external-", 0) == 0 && !chain.rules.empty()) {
        owner = rangeOwners(name).back(), rule = &chain.rules.back();
      } else {
        continue;
      }
      // [{"match":...},{"dnat":{"family":..,"addr":{"map":{"key":{"numgen":{..,"mod":N,"offset":B}},"data":"@M"}}}}]
      rapidjson::Document d;
      d.Parse(rule->exprJson.c_str());
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
      if (complete) slots_.adopt(slotOwner(f, owner), std::move(slot));
    }
  }
}

}  // namespace kpn::render
