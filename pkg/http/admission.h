// Who gets a connection on the daemon's HTTP ports (health-check node ports, healthz, metrics):
// the bookkeeping behind "no client, or group of clients, can make these ports refuse others".
// Pure (time is passed in, no sockets), so the policy is unit-tested as a table of decisions;
// server.cc applies them.
//
// - Connections from this host (loopback, or one of its own addresses: the kubelet probes the
//   node IP from the node IP) are always served. They have their own small cap; beyond it the
//   longest idle of them makes room, or with none idle the oldest.
// - An outside source (an IPv4 address, or an IPv6 /64: one host can hold a whole /64) holds at
//   most `perSource` connections; beyond that its own longest idle one makes room, else the new
//   one is refused.
// - All outside connections together hold at most `total` (the share of file descriptors the
//   daemon gives to HTTP). From `highWater` on, each newcomer makes room, in this order:
//     1. the longest idle connection of the heaviest source, if that source holds more than the
//        newcomer's would (idle: waiting for a request, a kept-alive one or one that never sent);
//     2. the longest idle connection anywhere, if idle for `grace` (a connection only just
//        accepted, whose request is on its way, is not idle in this sense);
//     and at `total`, when neither exists:
//     3. the oldest connection of the heaviest source, if it holds more than the newcomer's would;
//     4. the connection whose request has been under way longest, if for `grace` (a slow sender);
//     5. else the newcomer is refused.
//   So a source with few connections (a load balancer's prober) gets in at the expense of whoever
//   holds the most, and its own connection, answered within milliseconds, is never the one that
//   makes room.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kpn::http {

// An address in IPv6 form (IPv4 as IPv4-mapped, ::ffff:a.b.c.d).
using Address16 = std::array<uint8_t, 16>;

// A connection's peer as admission sees it.
struct Peer {
  Address16 source{};  // IPv4: the v4-mapped address; IPv6: its /64, the rest zero
  bool local = false;  // from this host
};

// The peer of a connection from `remote` to `local` (the socket's own address). From this host:
// a loopback source, or the connection's own address (this host talking to its node IP).
Peer peerOf(const Address16& remote, const Address16& local);

struct AdmissionLimits {
  size_t total = 512;     // outside connections, all servers of a loop together
  size_t perSource = 32;  // from one outside source
  size_t local = 64;      // from this host
  // How long a connection may wait for its request, or take to send it, before it may make room
  // for others whoever holds it (any client of these ports sends its request at once).
  std::chrono::milliseconds grace{1000};
  size_t highWater() const { return total - std::max<size_t>(1, total / 16); }
  // For a budget of `total` outside connections: a source may hold 1/16 of it (4..32: a load
  // balancer's prober or a Prometheus server needs a handful), this host 1/8 (8..128).
  static AdmissionLimits forBudget(size_t total);
};

class Admission {
 public:
  using Id = uint64_t;
  using Time = std::chrono::steady_clock::time_point;
  struct Decision {
    bool admitted = false;
    std::vector<Id> evict;  // close these first; they are already forgotten here
  };

  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // A new connection. Admitted ones start idle (waiting for their first request).
  Decision admit(Id id, const Peer& peer, Time now);
  void busy(Id id, Time now);  // a request started arriving
  void idle(Id id, Time now);  // answered; waits for the next request
  void closed(Id id);          // gone; nothing if it was evicted (or never admitted)

  size_t open() const { return open_; }  // from outside
  size_t openLocal() const { return local_.conns.size(); }
  size_t sources() const { return sources_.size(); }
  const AdmissionLimits& limits() const { return limits_; }

 private:
  using Key = Address16;
  struct Source {
    Key key;
    std::list<Id> conns;  // oldest first
  };
  struct Conn {
    Source* source;
    bool local;
    std::list<Id>::iterator inSource;
    bool idle = true;
    Time since;                       // when it last became idle, or busy
    std::list<Id>::iterator inState;  // in idle_ or busy_ (outside connections)
  };
  std::optional<Id> oldestIdleOf(const Source& s) const;
  std::pair<size_t, Source*> heaviest() const;
  std::optional<Id> makeRoom(size_t mine, Time now) const;  // whom to evict for a newcomer, if anyone
  void add(Id id, Source& s, bool local, Time now);
  void setIdle(Id id, bool idle, Time now);
  void forget(Id id, std::vector<Id>* evicted);  // evicted: where to report it, or null
  void reindex(Source& s, size_t before);        // s's count changed from `before`

  AdmissionLimits limits_;
  std::unordered_map<Id, Conn> conns_;
  std::map<Key, Source> sources_;                // outside sources with a connection
  std::set<std::pair<size_t, Source*>> byCount_;  // outside sources by how many they hold
  std::list<Id> idle_;                            // idle outside connections, longest idle first
  std::list<Id> busy_;                            // the others, longest under way first
  Source local_;
  size_t open_ = 0;
};

}  // namespace kpn::http
