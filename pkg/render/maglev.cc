#include "pkg/render/maglev.h"

#include <algorithm>
#include <numeric>

#include "pkg/render/fnv.h"

namespace kpn::render {

uint32_t maglevTableSize(size_t endpoints) {
  if (endpoints <= 25) return 251;
  if (endpoints <= 100) return 1021;
  if (endpoints <= 400) return 4093;
  return 16381;
}

std::vector<uint32_t> maglevTable(const std::vector<std::string>& endpoints, uint32_t size) {
  const size_t n = endpoints.size();
  std::vector<uint32_t> table(size, 0);
  if (n == 0 || size < 2) return table;
  std::vector<uint64_t> offset(n), skip(n), next(n, 0);
  for (size_t i = 0; i < n; ++i) {
    offset[i] = fnv1a(endpoints[i], kFnvOffsetBasis) % size;
    skip[i] = fnv1a(endpoints[i], 1469598103934665603ull ^ 0x9e3779b97f4a7c15ull) % (size - 1) + 1;
  }
  // Turns in the order of the names, so the table depends on the set of endpoints only.
  std::vector<size_t> turn(n);
  std::iota(turn.begin(), turn.end(), 0);
  std::sort(turn.begin(), turn.end(), [&](size_t a, size_t b) { return endpoints[a] < endpoints[b]; });
  std::vector<bool> taken(size, false);
  size_t filled = 0;
  while (true) {
    for (size_t i : turn) {
      // Endpoint i's next preferred slot that is still free (its permutation: offset + j*skip).
      uint64_t slot = (offset[i] + next[i] * skip[i]) % size;
      while (taken[slot]) {
        ++next[i];
        slot = (offset[i] + next[i] * skip[i]) % size;
      }
      taken[slot] = true;
      table[slot] = static_cast<uint32_t>(i);
      ++next[i];
      if (++filled == size) return table;
    }
  }
}

}  // namespace kpn::render
