// FNV-1a, 64 bits: a hash that is the same in every build and on every machine (std::hash is
// not), for the values the kernel keeps across restarts and nodes share (Maglev tables, affinity
// scopes).
#pragma once

#include <cstdint>
#include <string_view>

namespace kpn::render {

inline constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;

inline uint64_t fnv1a(std::string_view s, uint64_t basis = kFnvOffsetBasis) {
  uint64_t h = basis;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kpn::render
