#include "pkg/render/source_hash_table.h"

#include <algorithm>
#include <limits>
#include <map>

#include "pkg/render/fnv.h"

namespace kpn::render {

namespace {

constexpr uint32_t kFree = std::numeric_limits<uint32_t>::max();

// splitmix64's finaliser: a slot's score for an endpoint (rendezvous order among the candidates).
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t score(uint64_t endpointHash, size_t slot) { return mix(endpointHash ^ mix(slot + 0x9E3779B97F4A7C15ull)); }

size_t initialSize(size_t n) {
  size_t m = kMinHashSlots;
  while (m < kSlotsPerEndpoint * n && m < kMaxHashSlots) m *= 2;
  return m;
}

std::vector<size_t> countsOf(const std::vector<uint32_t>& slots, size_t n) {
  std::vector<size_t> count(n, 0);
  for (uint32_t e : slots)
    if (e != kFree) ++count[e];
  return count;
}

// Every endpoint to floor(M/N) or ceil(M/N) slots, moving as few as possible: the ceil shares go
// to the endpoints that hold most, the fullest give up their excess (first slots whose neighbour
// in the pair is someone else's, so that pairs stay whole for a later halving), and each free slot
// goes to the pair's other owner if it still needs slots, else to the needy endpoint that scores
// highest for it.
void balance(std::vector<uint32_t>& slots, const std::vector<uint64_t>& hash) {
  const size_t n = hash.size(), m = slots.size();
  std::vector<size_t> count = countsOf(slots, n);
  std::vector<size_t> rank(n);
  for (size_t i = 0; i < n; ++i) rank[i] = i;
  std::sort(rank.begin(), rank.end(), [&](size_t a, size_t b) {
    if (count[a] != count[b]) return count[a] > count[b];
    return hash[a] != hash[b] ? hash[a] < hash[b] : a < b;
  });
  std::vector<size_t> target(n, m / n);
  for (size_t r = 0; r < m % n; ++r) ++target[rank[r]];

  std::vector<std::vector<size_t>> owned(n);
  for (size_t s = 0; s < m; ++s)
    if (slots[s] != kFree) owned[slots[s]].push_back(s);
  auto pairedWith = [&](size_t s, uint32_t e) { return (s ^ 1) < m && slots[s ^ 1] == e; };
  for (size_t e = 0; e < n; ++e) {
    if (count[e] <= target[e]) continue;
    std::vector<size_t>& mine = owned[e];
    std::sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
      bool pa = pairedWith(a, static_cast<uint32_t>(e)), pb = pairedWith(b, static_cast<uint32_t>(e));
      if (pa != pb) return !pa;
      return score(hash[e], a) < score(hash[e], b);
    });
    for (size_t k = 0; k < count[e] - target[e]; ++k) slots[mine[k]] = kFree;
    count[e] = target[e];
  }

  std::vector<uint32_t> needy;
  for (size_t e = 0; e < n; ++e)
    if (count[e] < target[e]) needy.push_back(static_cast<uint32_t>(e));
  auto give = [&](size_t s, uint32_t e) {
    slots[s] = e;
    if (++count[e] == target[e]) needy.erase(std::find(needy.begin(), needy.end(), e));
  };
  auto best = [&](size_t s, size_t atLeast) {
    uint32_t pick = kFree;
    uint64_t top = 0;
    for (uint32_t e : needy) {
      uint64_t v = score(hash[e], s);
      if (target[e] - count[e] >= atLeast && (pick == kFree || v > top)) top = v, pick = e;
    }
    return pick;
  };
  // First the free slots that complete a pair, then whole free pairs to one endpoint, then the rest.
  for (size_t s = 0; s < m && !needy.empty(); ++s) {
    const uint32_t other = (s ^ 1) < m ? slots[s ^ 1] : kFree;
    if (slots[s] == kFree && other != kFree && count[other] < target[other]) give(s, other);
  }
  for (size_t s = 0; s + 1 < m && !needy.empty(); s += 2) {
    if (slots[s] != kFree || slots[s + 1] != kFree) continue;
    uint32_t e = best(s, 2);
    if (e == kFree) continue;
    give(s, e);
    give(s + 1, e);
  }
  for (size_t s = 0; s < m && !needy.empty(); ++s)
    if (slots[s] == kFree) give(s, best(s, 1));
}

// Half the slots: each pair becomes one slot with one of its owners (the one that holds fewer, so
// the balance after moves less).
std::vector<uint32_t> halved(const std::vector<uint32_t>& slots, size_t n) {
  std::vector<size_t> count = countsOf(slots, n);
  std::vector<uint32_t> out(slots.size() / 2);
  for (size_t p = 0; p < out.size(); ++p) {
    uint32_t a = slots[2 * p], b = slots[2 * p + 1];
    out[p] = a == kFree ? b : b == kFree ? a : count[b] < count[a] ? b : a;
  }
  return out;
}

}  // namespace

HashTable hashTableFromSlots(const std::vector<std::string>& values) {
  HashTable t;
  t.endpoints = values;
  std::sort(t.endpoints.begin(), t.endpoints.end());
  t.endpoints.erase(std::unique(t.endpoints.begin(), t.endpoints.end()), t.endpoints.end());
  for (const std::string& v : values)
    t.slots.push_back(
        static_cast<uint32_t>(std::lower_bound(t.endpoints.begin(), t.endpoints.end(), v) - t.endpoints.begin()));
  return t;
}

HashTable updateHashTable(const HashTable& previous, const std::vector<std::string>& endpoints) {
  HashTable out;
  out.endpoints = endpoints;
  std::sort(out.endpoints.begin(), out.endpoints.end());
  const size_t n = out.endpoints.size();
  if (n == 0) return out;
  std::vector<uint64_t> hash(n);
  for (size_t i = 0; i < n; ++i) hash[i] = fnv1a(out.endpoints[i]);

  std::vector<uint32_t> slots;
  if (previous.slots.empty()) {
    slots.assign(initialSize(n), kFree);
  } else {
    // The previous slots in terms of the new endpoints; those that left free their slots.
    std::vector<uint32_t> index(previous.endpoints.size(), kFree);
    for (size_t i = 0; i < previous.endpoints.size(); ++i) {
      auto it = std::lower_bound(out.endpoints.begin(), out.endpoints.end(), previous.endpoints[i]);
      if (it != out.endpoints.end() && *it == previous.endpoints[i]) index[i] = static_cast<uint32_t>(it - out.endpoints.begin());
    }
    slots.reserve(previous.slots.size());
    for (uint32_t e : previous.slots) slots.push_back(e < index.size() ? index[e] : kFree);
    // Grow: each slot's two halves keep its endpoint, for every client hash.
    while (slots.size() < kSlotsPerEndpoint * n && slots.size() * 2 <= kMaxHashSlots) {
      std::vector<uint32_t> doubled(slots.size() * 2);
      for (size_t s = 0; s < doubled.size(); ++s) doubled[s] = slots[s / 2];
      slots.swap(doubled);
    }
  }
  balance(slots, hash);

  // Shrink by one half when the table holds four times what the count needs and halving moves at
  // most half an endpoint's share (1/N, N the larger count) more than keeping the size.
  const size_t m = slots.size(), larger = std::max(n, previous.endpoints.size());
  if (m % 2 == 0 && m / 2 >= kMinHashSlots && m >= 4 * kSlotsPerEndpoint * n) {
    std::vector<uint32_t> half = halved(slots, n);
    balance(half, hash);
    size_t moved = 0;
    for (size_t s = 0; s < m; ++s) moved += half[s / 2] != slots[s];
    if (moved * 2 * larger <= m) slots.swap(half);
  }
  out.slots = std::move(slots);
  return out;
}

}  // namespace kpn::render
