#include "pkg/render/slot_adoption.h"

#include <map>
#include <set>

#include "pkg/render/pick_chains.h"
#include "pkg/render/service_part.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

// "<prefix><ns>/<name>/<proto>/<port>" -> the parts, or false.
bool splitChainName(const std::string& chain, const std::string& prefix, std::string* serviceKey, std::string* proto,
                    std::string* port) {
  if (chain.compare(0, prefix.size(), prefix) != 0) return false;
  std::vector<std::string> parts;
  size_t from = prefix.size();
  for (size_t slash; (slash = chain.find('/', from)) != std::string::npos; from = slash + 1)
    parts.push_back(chain.substr(from, slash - from));
  parts.push_back(chain.substr(from));
  if (parts.size() != 4) return false;
  *serviceKey = parts[0] + "/" + parts[1], *proto = parts[2], *port = parts[3];
  return true;
}

void adoptSharedDispatch(Family f, const ListedTable& table, BackendOrders& orders) {
  for (const std::string& map : backendsMapNames()) {
    auto set = table.sets.find(map);
    if (set == table.sets.end()) continue;
    std::map<std::string, std::map<uint32_t, std::string>> byDestination;
    for (const auto& [key, value] : set->second.elements) {
      auto k = splitSlotKey(key);
      if (!k) continue;
      std::string id = std::string(familyName(f)) + " " + map + "|";
      for (size_t i = 0; i < k->prefix.size(); ++i) id += (i ? "," : "") + k->prefix[i];
      byDestination[id][k->slot] = value;
    }
    for (auto& [id, slots] : byDestination) {
      EndpointOrder order;
      for (const auto& [slot, value] : slots) {
        if (slot != order.size()) break;  // not dense: adopt the dense beginning only
        order.push_back(value);
      }
      orders.adoptListedSlots(id, order);
      // A source-hash destination's slots are its lookup table (source_hash_table.h), naming each
      // endpoint many times: adopted as that table, so that a restart moves no client.
      if (std::set<std::string>(order.begin(), order.end()).size() != order.size()) {
        if (order.size() == slots.size()) orders.adoptTable(id, hashTableFromSlots(order));
        continue;
      }
      orders.adoptDestination(id, std::move(order));
    }
  }
}

void adoptChainPerService(Family f, const ListedTable& table, BackendOrders& orders) {
  for (const auto& [name, chain] : table.chains) {
    // service-<...> and local-<...>: one dnat rule over a range of a backends map; external-<...>
    // of an eTP=Local service ends with the local- range's rule.
    std::string serviceKey, proto, port;
    const ListedRule* rule = nullptr;
    bool local = false;
    if (splitChainName(name, "service-", &serviceKey, &proto, &port) && chain.rules.size() == 1) {
      rule = &chain.rules[0];
    } else if (splitChainName(name, "local-", &serviceKey, &proto, &port) && chain.rules.size() == 1) {
      rule = &chain.rules[0], local = true;
    } else if (splitChainName(name, "external-", &serviceKey, &proto, &port) && !chain.rules.empty()) {
      rule = &chain.rules.back(), local = true;
    }
    if (!rule || !rule->numgenDnat) continue;
    const ListedNumgenDnat& dn = *rule->numgenDnat;
    auto set = table.sets.find(dn.map);
    if (set == table.sets.end()) continue;
    EndpointOrder order;
    for (uint32_t k = 0; k < dn.mod; ++k) {
      auto e = set->second.elements.find(std::to_string(dn.offset + k));
      if (e == set->second.elements.end()) break;
      order.push_back(e->second);
    }
    if (order.size() == dn.mod) orders.adoptOwner(serviceKey, orderOwner(f, local, proto, port), std::move(order));
  }
}

}  // namespace

void adoptOrders(Family f, const ListedTable& table, BackendOrders& orders) {
  adoptSharedDispatch(f, table, orders);
  adoptChainPerService(f, table, orders);
}

}  // namespace kpn::render
