// The libnftables helper's environment: the daemon's own, plus the allocator setting that makes a
// big transaction cheap to build.
//
// A cold sync's transaction makes libnftables (its JSON parser, then its own objects) allocate
// some millions of small blocks in a few hundred MiB of heap; glibc's malloc then spends most of
// its time in TLB misses walking its bins. `glibc.malloc.hugetlb=1` has malloc ask for
// transparent huge pages (madvise) for its heap, which the kernel's default THP mode ("madvise")
// grants: measured at 10k services x 10, the helper's user time for the same JSON halved
// (docs/benchmarks.md). The setting is read by glibc when a process starts, so it goes into the
// helper's environment; an operator's own GLIBC_TUNABLES is kept, and a hugetlb value it already
// gives wins.
#pragma once

#include <string>
#include <vector>

namespace kpn::nft {

constexpr const char* kHelperMallocTunable = "glibc.malloc.hugetlb=1";

// env: "NAME=value" entries (a copy of environ). Returns them with GLIBC_TUNABLES holding
// kHelperMallocTunable: appended to an existing GLIBC_TUNABLES ("a=1:b=2" -> "a=1:b=2:glibc.malloc.hugetlb=1")
// unless it names glibc.malloc.hugetlb already, or added as a new entry.
std::vector<std::string> helperEnvironment(std::vector<std::string> env);

}  // namespace kpn::nft
