// Source hash with a Maglev lookup table (Eisenbud et al., NSDI 2016): a destination's M slots
// (M prime, much larger than the endpoint count) are filled from each endpoint's own permutation
// of the slots in turn, so that every endpoint holds about M/N slots and adding or removing one
// endpoint changes only about 1/N of the slots (`mod N` would move almost every client). The
// packet picks slot `jhash ip saddr mod M`: the same client address always reaches the same
// endpoint with no state, and the table is the destination's elements in the backends map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kpn::render {

// One seed for every table: the same client hashes alike after a restart and on every node.
inline constexpr uint32_t kSourceHashSeed = 0x6b706e21;

// The table size for n endpoints: 251 up to 25, then 1021, 4093, 16381 (about 10 slots or more
// per endpoint keeps the shares within a few percent). A count that crosses a size re-hashes
// every client of that destination, once.
uint32_t maglevTableSize(size_t endpoints);

// For each of the `size` slots, the index into `endpoints` (their identities, e.g. "ip . port"
// JSON; the order of the list does not matter) of the endpoint it names.
std::vector<uint32_t> maglevTable(const std::vector<std::string>& endpoints, uint32_t size);

}  // namespace kpn::render
