// The daemon's own malloc on transparent huge pages (nft/kernel/huge_page_malloc.h says why).
#pragma once

namespace kpn::cmd {

// Re-executes this binary, same PID and arguments, with glibc.malloc.hugetlb=1 added to
// GLIBC_TUNABLES, unless the environment already names that tunable (then, or when the exec
// fails, it returns and the process goes on as it is). The first thing main() does, before any
// thread, descriptor or log exists; the exec'd process finds the tunable and does not repeat it,
// and takes back the name (comm) the exec changed to "exe".
void reexecWithHugePageMalloc(char** argv);

}  // namespace kpn::cmd
