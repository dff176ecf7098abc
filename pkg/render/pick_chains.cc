#include "pkg/render/pick_chains.h"

#include <algorithm>

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

uint32_t searchSlot(uint32_t lo, uint32_t hi) {
  if (lo <= 2) return lo;                      // 1 and 2 endpoints: one lookup each, as before
  return std::min(2 * (lo - 1), (lo + hi - 1) / 2);  // gallop (4, 8) until halving is smaller
}

std::string searchChainName(KeySpace space, api::Protocol proto, uint32_t lo, uint32_t hi) {
  return protocolPickChainName(space, proto) + "-" + std::to_string(lo) + "-" + std::to_string(hi);
}

namespace {

std::string endpointsComment(uint32_t lo, uint32_t hi) {
  if (lo == hi) return std::to_string(lo) + (lo == 1 ? " endpoint" : " endpoints");
  return std::to_string(lo) + "-" + std::to_string(hi) + " endpoints";
}

// The chain of the destinations whose count is in [lo, hi] (slots 0..lo-1 exist, slot hi does
// not, unless hi is the pool's top), and below it the chains its rules go to.
void searchChains(Family f, const Pool& pool, const std::string& name, uint32_t lo, uint32_t hi,
                  std::vector<Chain>& out) {
  const auto& [space, proto] = pool;
  const std::vector<Expr> dest = destinationFields(f, space, proto);
  // The probes key `th dport` where the dnat says `tcp dport`: only the key space's entry rule
  // leads here, and its `tcp dport` has tested the protocol; `tcp dport` in a probe would test it
  // again (nft puts `meta l4proto tcp` before the load), two expressions more per probe on the
  // first packet of every connection. The dnat keeps it: nft 1.0.6 JSON refuses `th` beside `ip
  // daddr` inside a dnat map (destinationFields).
  std::vector<Expr> probe = dest;
  probe.back() = ex::payload("th", "dport");
  const std::string map = backendsMapName(space, proto);
  auto dnatAmong = [&](uint32_t n) {
    std::vector<Expr> key = dest;
    // `numgen random mod 1` for one endpoint too: nft's grammar takes no bit operation in a dnat's
    // map key, so `meta length & 0` there would list back as a rule `nft -f` cannot read.
    key.push_back(ex::numgenRandom(n, 0));
    return st::dnatMap(f, ex::concat(key), map);
  };
  out.push_back(Chain{name, std::nullopt, {}});
  const size_t self = out.size() - 1;
  bool tried = false;
  while (lo < hi) {
    // Once every count left is over half of hi, first a try: dnat to a random one of hi slots.
    // It lands (slot r exists: r < N) with a chance of N / hi, at least a half, and then r is
    // uniform over the N slots; when it misses, the map lookup ends the rule and the search
    // goes on to an exact dnat among N. The mixture of two uniform choices is uniform (each
    // endpoint: 1/hi + (1 - N/hi) / N = 1/N), and the count hi itself costs no more probes.
    if (!tried && 2 * lo > hi) {
      out[self].rules.push_back(makeRule({dnatAmong(hi)}, "try " + endpointsComment(lo, hi)));
      tried = true;
    }
    // Slot m missing: the count is in [lo, m]; present: in [m + 1, hi], the rest of this chain.
    const uint32_t m = searchSlot(lo, hi);
    std::vector<Expr> slot = probe;
    slot.push_back(ex::integerConstant(m));
    Stmt missing = st::matchSet(ex::concat(slot), map, true);
    if (m == lo) {
      out[self].rules.push_back(makeRule({missing, dnatAmong(lo)}, endpointsComment(lo, lo)));
    } else {
      const std::string below = searchChainName(space, proto, lo, m);
      out[self].rules.push_back(makeRule({missing, st::goTo(below)}, endpointsComment(lo, m)));
      searchChains(f, pool, below, lo, m, out);
    }
    lo = m + 1;
  }
  out[self].rules.push_back(makeRule({dnatAmong(hi)}, endpointsComment(hi, hi)));
}

}  // namespace

std::vector<Chain> protocolPickChains(Family f, const Pool& pool) {
  std::vector<Chain> chains;
  searchChains(f, pool, protocolPickChainName(pool.first, pool.second), 1, kPooledCounts, chains);
  return chains;
}

Chain entryChain(Family f, KeySpace space, const std::set<Pool>& pools) {
  Chain c{entryChainName(space), std::nullopt, {}};
  for (api::Protocol proto : kProtocols) {
    if (!pools.count({space, proto})) continue;
    // Slot 0 in the backends map: a destination with endpoints (one lookup for all other traffic).
    // Destinations of the dispatch maps have slots too, but their lookup came first and went.
    std::vector<Expr> key = destinationFields(f, space, proto);
    key.push_back(ex::integerConstant(0));
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
