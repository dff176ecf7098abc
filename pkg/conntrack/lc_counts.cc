#include "pkg/conntrack/lc_counts.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

namespace kpn::conntrack {

namespace {

// TCP_CONNTRACK_ESTABLISHED and SCTP_CONNTRACK_ESTABLISHED (libnetfilter_conntrack_tcp.h, _sctp.h).
constexpr uint8_t kEstablished = 3;

uint8_t ipProto(api::Protocol p) {
  switch (p) {
    case api::Protocol::TCP: return IPPROTO_TCP;
    case api::Protocol::UDP: return IPPROTO_UDP;
    case api::Protocol::SCTP: return IPPROTO_SCTP;
  }
  return IPPROTO_TCP;
}

uint8_t ipFamily(nft::Family f) { return f == nft::Family::IPv4 ? AF_INET : AF_INET6; }

// A port's identity across snapshots.
using PortId = std::tuple<std::string, std::string, nft::Family, api::Protocol>;
PortId idOf(const services::LeastConnPort& p) { return {p.serviceKey, p.portName, p.family, p.protocol}; }

}  // namespace

bool countsAsActive(const Flow& f) {
  return (f.proto == IPPROTO_TCP || f.proto == IPPROTO_SCTP) && f.state == kEstablished;
}

void LeastConnCounter::setPorts(const std::map<std::string, std::vector<services::LeastConnPort>>& ports) {
  std::vector<Port> next;
  std::map<PortId, uint32_t> index;
  byFrontend_.clear();
  for (const auto& [key, list] : ports)
    for (const services::LeastConnPort& spec : list) {
      Port p;
      p.spec = spec;
      p.family = ipFamily(spec.family);
      p.proto = ipProto(spec.protocol);
      for (const services::LeastConnEndpoint& ep : spec.endpoints) {
        uint8_t family = 0;
        auto ip = parseIp(ep.ip, &family);
        if (!ip || family != p.family) continue;
        Endpoint e;
        e.at = {*ip, static_cast<uint16_t>(ep.port)};
        e.value = ep.value;
        e.text = (family == AF_INET6 ? "[" + ep.ip + "]" : ep.ip) + ":" + std::to_string(ep.port);
        p.byEndpoint.emplace(e.at, p.endpoints.size());
        p.endpoints.push_back(std::move(e));
      }
      std::map<std::string, size_t> byValue;
      for (size_t i = 0; i < p.endpoints.size(); ++i) byValue[p.endpoints[i].value] = i;
      for (const services::LeastConnSet& set : spec.sets) {
        Set s;
        s.owner = set.owner;
        for (const std::string& v : set.values)
          if (auto it = byValue.find(v); it != byValue.end()) s.endpoints.push_back(it->second);
        p.sets.push_back(std::move(s));
      }
      const uint32_t i = static_cast<uint32_t>(next.size());
      index[idOf(spec)] = i;
      for (const std::string& text : spec.frontendIps) {
        uint8_t family = 0;
        auto ip = parseIp(text, &family);
        if (ip && family == p.family) byFrontend_[{p.family, p.proto, {*ip, static_cast<uint16_t>(spec.port)}}] = i;
      }
      if (spec.nodePort) byFrontend_[{p.family, p.proto, {Ip{}, static_cast<uint16_t>(*spec.nodePort)}}] = i;
      next.push_back(std::move(p));
    }

  // The entries that still count, and the choices already handed out (made again when counted).
  std::unordered_map<uint32_t, Counted> kept;
  for (const auto& [id, c] : flows_) {
    const Port& old = ports_[c.port];
    auto to = index.find(idOf(old.spec));
    if (to == index.end()) continue;
    Port& p = next[to->second];
    auto e = p.byEndpoint.find(old.endpoints[c.endpoint].at);
    if (e != p.byEndpoint.end()) kept[id] = {to->second, static_cast<uint32_t>(e->second), c.active};
  }
  for (const Port& old : ports_) {
    auto to = index.find(idOf(old.spec));
    if (to == index.end()) continue;
    for (Set& s : next[to->second].sets)
      for (const Set& was : old.sets)
        if (was.owner == s.owner) s.chosen = was.chosen;
  }
  ports_ = std::move(next);
  flows_ = std::move(kept);
  for (const auto& [id, c] : flows_) count(c, +1);
}

void LeastConnCounter::count(const Counted& c, int delta) {
  Port& p = ports_[c.port];
  Endpoint& e = p.endpoints[c.endpoint];
  uint32_t& n = c.active ? e.active : e.inactive;
  n = static_cast<uint32_t>(static_cast<int64_t>(n) + delta);
  p.dirty = true;
}

void LeastConnCounter::update(const Flow& f, Time seen) {
  if (!f.id) return;
  auto port = byFrontend_.find({f.family, f.proto, {f.origDst, f.origDport}});
  if (port == byFrontend_.end()) port = byFrontend_.find({f.family, f.proto, {Ip{}, f.origDport}});
  std::optional<Counted> now;
  if (port != byFrontend_.end()) {
    const Port& p = ports_[port->second];
    auto e = p.byEndpoint.find({f.replySrc, f.replySport});
    if (e != p.byEndpoint.end()) now = Counted{port->second, static_cast<uint32_t>(e->second), countsAsActive(f)};
  }
  auto it = flows_.find(*f.id);
  if (it != flows_.end()) {
    const Counted was = it->second;
    if (now && was.port == now->port && was.endpoint == now->endpoint && was.active == now->active) return;
    count(was, -1);
    if (!now) {
      flows_.erase(it);
      return;
    }
    it->second = *now;
    count(*now, +1);
  } else if (now) {
    flows_.emplace(*f.id, *now);
    count(*now, +1);
    if (seen != Time{}) ports_[now->port].arrivals.push_back(seen);
  }
}

void LeastConnCounter::destroy(uint32_t id) {
  auto it = flows_.find(id);
  if (it == flows_.end()) return;
  count(it->second, -1);
  flows_.erase(it);
}

void LeastConnCounter::beginResync() {
  flows_.clear();
  for (Port& p : ports_) {
    for (Endpoint& e : p.endpoints) e.active = e.inactive = 0;
    p.dirty = true;
  }
}

std::vector<std::string> LeastConnCounter::choose(const Port& p, const Set& s, size_t want, std::mt19937& rng) const {
  std::vector<uint64_t> overhead;
  for (size_t i : s.endpoints) overhead.push_back(uint64_t(p.endpoints[i].active) * 256 + p.endpoints[i].inactive);
  const uint64_t least = *std::min_element(overhead.begin(), overhead.end());
  std::vector<std::string> tie;
  for (size_t k = 0; k < s.endpoints.size(); ++k)
    if (overhead[k] == least) tie.push_back(p.endpoints[s.endpoints[k]].value);
  if (tie.size() > services::kLeastConnSlots) {
    // A tie larger than the slots: keep the sample while it is still all in the tie.
    const std::set<std::string> inTie(tie.begin(), tie.end());
    bool keep = s.chosen.size() == services::kLeastConnSlots;
    for (const std::string& v : s.chosen) keep = keep && inTie.count(v);
    if (keep) return s.chosen;
    std::vector<std::string> sample;
    std::sample(tie.begin(), tie.end(), std::back_inserter(sample), services::kLeastConnSlots, rng);
    return sample;
  }
  // Rounds of the least loaded, each adding one connection's weight to each endpoint of it, while
  // fewer than `want` slots are named and the next round fits (a round is never split: a tie stays
  // a tie).
  const uint64_t weight = p.proto == IPPROTO_UDP ? 1 : 256;
  std::vector<uint32_t> times(s.endpoints.size(), 0);
  size_t named = 0;
  for (;;) {
    const uint64_t low = *std::min_element(overhead.begin(), overhead.end());
    const size_t round = static_cast<size_t>(std::count(overhead.begin(), overhead.end(), low));
    if (named > 0 && (named >= want || named + round > services::kLeastConnSlots)) break;
    for (size_t k = 0; k < overhead.size(); ++k)
      if (overhead[k] == low) ++times[k], overhead[k] += weight;
    named += round;
  }
  // Each endpoint's share in the fewest slots: two named 8 times each are two slots.
  uint32_t common = 0;
  for (uint32_t t : times) common = std::gcd(common, t);
  for (uint32_t& t : times) t /= common;
  std::vector<std::string> values;
  for (size_t k = 0; k < s.endpoints.size(); ++k)
    values.insert(values.end(), times[k], p.endpoints[s.endpoints[k]].value);
  return values;
}

std::vector<LeastConnChoice> LeastConnCounter::takeChoices(std::mt19937& rng, Time now) {
  std::vector<LeastConnChoice> out;
  for (Port& p : ports_) {
    while (!p.arrivals.empty() && p.arrivals.front() + burstWindow_ <= now) {
      p.arrivals.pop_front();
      p.dirty = true;  // fewer expected: a narrower choice
    }
    if (!p.dirty) continue;
    p.dirty = false;
    const size_t want = std::clamp<size_t>(p.arrivals.size(), 1, services::kLeastConnSlots);
    for (Set& s : p.sets) {
      if (s.endpoints.empty()) continue;
      std::vector<std::string> values = choose(p, s, want, rng);
      if (values == s.chosen) continue;
      s.chosen = values;
      out.push_back({p.spec.serviceKey, s.owner, std::move(values)});
    }
  }
  return out;
}

LeastConnCounter::Time LeastConnCounter::nextExpiry() const {
  Time next = Time::max();
  for (const Port& p : ports_)
    if (!p.arrivals.empty()) next = std::min(next, p.arrivals.front() + burstWindow_);
  return next;
}

std::vector<EndpointConnections> LeastConnCounter::endpointConnections() const {
  std::vector<EndpointConnections> out;
  for (const Port& p : ports_)
    for (const Endpoint& e : p.endpoints) out.push_back({p.spec.serviceKey, p.spec.portName, e.text, e.active, e.inactive});
  return out;
}

std::vector<LeastConnCounter::FrontendAddress> LeastConnCounter::frontendAddresses() const {
  std::vector<FrontendAddress> out;
  for (const auto& [f, port] : byFrontend_)
    if (f.where.ip != Ip{}) out.push_back({f.family, f.where.ip});
  std::sort(out.begin(), out.end(), [](const FrontendAddress& a, const FrontendAddress& b) {
    return a.family != b.family ? a.family < b.family : a.ip < b.ip;
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const FrontendAddress& a, const FrontendAddress& b) { return a.family == b.family && a.ip == b.ip; }),
            out.end());
  return out;
}

bool LeastConnCounter::anyNodePort(uint8_t family) const {
  for (const Port& p : ports_)
    if (p.family == family && p.spec.nodePort) return true;
  return false;
}

std::vector<uint8_t> LeastConnCounter::protocols(uint8_t family) const {
  std::set<uint8_t> out;
  for (const Port& p : ports_)
    if (p.family == family) out.insert(p.proto);
  return {out.begin(), out.end()};
}

}  // namespace kpn::conntrack
