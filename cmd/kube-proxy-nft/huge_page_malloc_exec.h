// The daemon's own malloc on transparent huge pages (nft/kernel/huge_page_malloc.h says why).
#pragma once

namespace kpn::cmd {

// Re-executes this binary, same PID and arguments, with glibc.malloc.hugetlb=1 added to
// GLIBC_TUNABLES, unless the environment already names that tunable (then it returns and the
// process goes on as it is). When the exec fails it returns with the tunable set in this
// process's environment, so that the children it starts (the libnftables helpers) still have it.
// The first thing main() does, before any thread, descriptor or log exists; the exec'd process
// finds the tunable and does not repeat it, and takes back the name (comm) the exec changed to "exe".
void reexecWithHugePageMalloc(char** argv);

}  // namespace kpn::cmd
