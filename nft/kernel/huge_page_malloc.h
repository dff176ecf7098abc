// malloc on transparent huge pages, for the daemon and its libnftables helper.
//
// A cold sync allocates millions of small blocks: the daemon's render and diff, and libnftables'
// JSON parser and objects in the helper (a few hundred MiB there). With 4 KiB pages, glibc's
// malloc spent much of that time in page faults and TLB misses walking its bins.
// `glibc.malloc.hugetlb=1` has malloc madvise its heap for transparent huge pages, which the
// kernel's default THP mode ("madvise") grants: at 10k services x 10 the helper's user time for the
// same JSON halved and the daemon's render + diff took about 40% less (docs/benchmarks.md), for
// about 1.5 MiB more settled RSS. glibc reads the setting only when a process starts, so it goes
// into the environment: the daemon re-executes itself once with it
// (cmd/kube-proxy-nft/huge_page_malloc_exec.h), and its helpers inherit it from there. An
// operator's own GLIBC_TUNABLES is kept, and a hugetlb value it already gives wins
// (glibc.malloc.hugetlb=0 turns this off).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpn::nft {

constexpr const char* kHugePageMallocTunable = "glibc.malloc.hugetlb=1";

// The GLIBC_TUNABLES value that asks for huge page malloc, given the current one (nullopt: unset):
// kHugePageMallocTunable appended ("a=1" -> "a=1:glibc.malloc.hugetlb=1"), or the current value
// as it is when it names glibc.malloc.hugetlb already.
std::string tunablesWithHugePageMalloc(std::optional<std::string_view> current);

// env: "NAME=value" entries (a copy of environ). Returns them with GLIBC_TUNABLES set to
// tunablesWithHugePageMalloc of its value: the existing entry changed in place, or a new one added.
std::vector<std::string> withHugePageMalloc(std::vector<std::string> env);

// Sets GLIBC_TUNABLES in this process's environment as withHugePageMalloc would: this process's
// malloc stays as it started, the children it starts from now on (the helpers) get it.
void setHugePageMallocForChildren();

// The current process's environment, as entries.
std::vector<std::string> currentEnvironment();

}  // namespace kpn::nft
