// glibc malloc settings for the daemon and its libnftables helper.
//
// A cold sync allocates millions of small blocks: the daemon's render and diff, and libnftables'
// JSON parser and objects in the helper (a few hundred MiB there, up to ~1 GiB at 30k services).
// - `glibc.malloc.hugetlb=1` has malloc madvise its heap for transparent huge pages, which the
//   kernel's default THP mode ("madvise") grants. With 4 KiB pages malloc's walks through its bins
//   were TLB misses: at 10k services x 10 the helper's user time for the same JSON halved and the
//   daemon's render + diff took about 40% less, for about 1.5 MiB more settled RSS.
// - `glibc.malloc.mxfast=0` turns fastbins off (tcache still caches small blocks per thread).
//   libnftables frees its parse tree and objects in long runs interleaved with large allocations,
//   each of which made malloc consolidate every fastbin (`malloc_consolidate` and `unlink_chunk`
//   were 14% of the helper's samples). Without them the helper's user time for the same cold
//   transaction fell 0.62 -> 0.43 s at 10k and 1.75 -> 1.26 s at 30k (5 interleaved pairs each,
//   docs/benchmarks.md); the daemon's own time did not move either way.
// glibc reads these only when a process starts, so they go into the environment: the daemon
// re-executes itself once with them (cmd/kube-proxy-nft/malloc_tunables_exec.h), and its helpers
// inherit them from there. An operator's own GLIBC_TUNABLES is kept, and a value it already gives
// for one of these wins (glibc.malloc.hugetlb=0 turns huge pages off, glibc.malloc.mxfast=64 brings
// fastbins back).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpn::nft {

// "name=value" each, in the order they are appended.
inline constexpr std::string_view kMallocTunables[] = {"glibc.malloc.hugetlb=1", "glibc.malloc.mxfast=0"};

// The GLIBC_TUNABLES value with ours, given the current one (nullopt: unset): each of
// kMallocTunables appended ("a=1" -> "a=1:glibc.malloc.hugetlb=1:glibc.malloc.mxfast=0") unless the
// current value names that tunable already.
std::string withMallocTunables(std::optional<std::string_view> current);

// env: "NAME=value" entries (a copy of environ). Returns them with GLIBC_TUNABLES set to
// withMallocTunables of its value: the existing entry changed in place, or a new one added.
std::vector<std::string> environmentWithMallocTunables(std::vector<std::string> env);

// Sets GLIBC_TUNABLES in this process's environment as environmentWithMallocTunables would: this
// process's malloc stays as it started, the children it starts from now on (the helpers) get them.
void setMallocTunablesForChildren();

// The current process's environment, as entries.
std::vector<std::string> currentEnvironment();

}  // namespace kpn::nft
