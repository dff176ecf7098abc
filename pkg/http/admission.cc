#include "pkg/http/admission.h"

#include <optional>

namespace kpn::http {

namespace {

bool isV4Mapped(const Address16& a) {
  for (int i = 0; i < 10; ++i)
    if (a[i] != 0) return false;
  return a[10] == 0xff && a[11] == 0xff;
}

bool isLoopback(const Address16& a) {
  if (isV4Mapped(a)) return a[12] == 127;  // 127.0.0.0/8
  for (int i = 0; i < 15; ++i)
    if (a[i] != 0) return false;
  return a[15] == 1;  // ::1
}

}  // namespace

Peer peerOf(const Address16& remote, const Address16& local) {
  Peer p;
  // A packet from outside cannot carry one of this host's addresses as its source (the kernel
  // drops it as a martian, and the handshake's reply would never leave the host).
  p.local = isLoopback(remote) || remote == local;
  p.source = remote;
  if (!isV4Mapped(remote)) std::fill(p.source.begin() + 8, p.source.end(), 0);
  return p;
}

AdmissionLimits AdmissionLimits::forBudget(size_t total) {
  AdmissionLimits l;
  l.total = std::max<size_t>(total, 1);
  l.perSource = std::clamp<size_t>(total / 16, 4, 32);
  l.local = std::clamp<size_t>(total / 8, 8, 128);
  return l;
}

std::optional<Admission::Id> Admission::oldestIdleOf(const Source& s) const {
  std::optional<Id> best;
  Time since{};
  for (Id id : s.conns) {
    const Conn& c = conns_.at(id);
    if (c.idle && (!best || c.since < since)) best = id, since = c.since;
  }
  return best;
}

std::pair<size_t, Admission::Source*> Admission::heaviest() const {
  if (byCount_.empty()) return {0, nullptr};
  return *byCount_.rbegin();
}

std::optional<Admission::Id> Admission::makeRoom(size_t mine, Time now) const {
  auto [count, heavy] = heaviest();
  bool heavier = heavy && count > mine + 1;
  if (heavier)
    if (auto v = oldestIdleOf(*heavy)) return v;
  if (!idle_.empty() && now - conns_.at(idle_.front()).since >= limits_.grace) return idle_.front();
  if (open_ < limits_.total) return std::nullopt;  // room enough without taking anyone's
  if (heavier) return heavy->conns.front();
  if (!busy_.empty() && now - conns_.at(busy_.front()).since >= limits_.grace) return busy_.front();
  return std::nullopt;
}

Admission::Decision Admission::admit(Id id, const Peer& peer, Time now) {
  Decision d;
  if (peer.local) {
    if (local_.conns.size() >= limits_.local) forget(oldestIdleOf(local_).value_or(local_.conns.front()), &d.evict);
    add(id, local_, true, now);
    d.admitted = true;
    return d;
  }
  auto mineIt = sources_.find(peer.source);
  size_t mine = mineIt == sources_.end() ? 0 : mineIt->second.conns.size();
  if (mine >= limits_.perSource) {
    auto victim = oldestIdleOf(mineIt->second);
    if (!victim) return d;
    forget(*victim, &d.evict);
  } else if (open_ >= limits_.highWater()) {
    if (auto victim = makeRoom(mine, now)) forget(*victim, &d.evict);
    else if (open_ >= limits_.total) return d;
  }
  auto it = sources_.try_emplace(peer.source).first;  // again: an eviction may have removed it
  it->second.key = peer.source;
  add(id, it->second, false, now);
  d.admitted = true;
  return d;
}

void Admission::add(Id id, Source& s, bool local, Time now) {
  size_t before = s.conns.size();
  s.conns.push_back(id);
  Conn c{&s, local, std::prev(s.conns.end()), true, now, {}};
  if (!local) {
    idle_.push_back(id);
    c.inState = std::prev(idle_.end());
    ++open_;
    reindex(s, before);
  }
  conns_.emplace(id, c);
}

void Admission::forget(Id id, std::vector<Id>* evicted) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  Source& s = *c.source;
  size_t before = s.conns.size();
  s.conns.erase(c.inSource);
  if (!c.local) {
    (c.idle ? idle_ : busy_).erase(c.inState);
    --open_;
    reindex(s, before);
    if (s.conns.empty()) sources_.erase(s.key);
  }
  conns_.erase(it);
  if (evicted) evicted->push_back(id);
}

void Admission::reindex(Source& s, size_t before) {
  if (before) byCount_.erase({before, &s});
  if (!s.conns.empty()) byCount_.insert({s.conns.size(), &s});
}

void Admission::busy(Id id, Time now) { setIdle(id, false, now); }
void Admission::idle(Id id, Time now) { setIdle(id, true, now); }

void Admission::setIdle(Id id, bool idle, Time now) {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second.idle == idle) return;
  Conn& c = it->second;
  c.idle = idle;
  c.since = now;
  if (c.local) return;
  (idle ? busy_ : idle_).erase(c.inState);
  std::list<Id>& to = idle ? idle_ : busy_;
  to.push_back(id);
  c.inState = std::prev(to.end());
}

void Admission::closed(Id id) { forget(id, nullptr); }

}  // namespace kpn::http
