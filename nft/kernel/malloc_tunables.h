// glibc malloc settings for the daemon and its libnftables helper.
//
// A cold sync allocates millions of small blocks: the daemon's render and diff, and libnftables'
// JSON parser and objects in the helper (a few hundred MiB there, ~1.4 GiB at 50k services).
// - `glibc.malloc.mxfast=0` turns fastbins off (tcache still caches small blocks per thread).
//   libnftables frees its parse tree and objects in long runs interleaved with large allocations,
//   each of which made malloc consolidate every fastbin (`malloc_consolidate` and `unlink_chunk`
//   were 14% of the helper's samples). Without them the helper's user time for the same cold
//   transaction fell 0.62 -> 0.43 s at 10k and 1.75 -> 1.26 s at 30k (5 interleaved pairs each,
//   docs/benchmarks.md); the daemon's own time did not move either way.
// - No huge pages (`glibc.malloc.hugetlb` is left at glibc's 0). They were ours until issue 27's
//   twelfth part: in memory that was just freed they save TLB misses (a 10k x 10 cold sync 7%
//   faster), but a cold start mostly gets memory the machine has not touched for a while, and on
//   a VM that returns freed memory to its host (virtio-balloon free page reporting, as on our CI
//   and bench machines) making such memory present costs ~3.4 ms per 2 MiB on huge pages against
//   ~1.25 ms on 4 KiB pages (the helper's 1 359 MiB at 50k: 2.3 s against 0.85 s). Likely why: the
//   host takes back only whole 2 MiB blocks, which is what a huge page needs, while 4 KiB pages
//   also come from fragments it never took. Every run started on settled memory, medians of 3
//   alternated: 10k x 10 cold sync 1168 -> 859 ms, 50k x 10 5433 -> 4621 ms.
// glibc reads these only when a process starts, so they go into the environment: the daemon
// re-executes itself once with them (cmd/kube-proxy-nft/malloc_tunables_exec.h), and its helpers
// inherit them from there. An operator's own GLIBC_TUNABLES is kept, and a value it already gives
// for one of these wins (glibc.malloc.mxfast=64 brings fastbins back); glibc.malloc.hugetlb=1 in
// it puts the heap on huge pages again.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpn::nft {

// "name=value" each, in the order they are appended.
inline constexpr std::string_view kMallocTunables[] = {"glibc.malloc.mxfast=0"};

// The GLIBC_TUNABLES value with ours, given the current one (nullopt: unset): each of
// kMallocTunables appended ("a=1" -> "a=1:glibc.malloc.mxfast=0") unless the
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
