// The daemon's own malloc settings (nft/kernel/malloc_tunables.h says which and why).
#pragma once

namespace kpn::cmd {

// Re-executes this binary, same PID and arguments, with our malloc tunables added to
// GLIBC_TUNABLES, unless the environment already names each of them (then it returns and the
// process goes on as it is). When the exec fails it returns with the tunables set in this
// process's environment, so that the children it starts (the libnftables helpers) still have them.
// The first thing main() does, before any thread, descriptor or log exists; the exec'd process
// finds the tunables and does not repeat it, and takes back the name (comm) the exec changed to "exe".
void reexecWithMallocTunables(char** argv);

}  // namespace kpn::cmd
