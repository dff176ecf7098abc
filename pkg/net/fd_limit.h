// File descriptors of the daemon. Outside clients open connections to health-check node ports on
// every node address; with the default soft RLIMIT_NOFILE of 1024 (the systemd unit sets none) a
// few dual-stack eTP=Local LoadBalancers let them take every descriptor. The daemon raises its
// soft limit to the hard one at start and gives HTTP connections of all ports together a share of
// it, keeping the rest for what must not fail: API watches, inotify, the listening sockets, the
// socketpair of a new libnftables helper (which holds a reserve of its own, nft/kernel/helper_process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kpn::net {

struct FdLimit {
  uint64_t soft = 0, hard = 0;
  bool raised = false;
  std::string error;  // why it could not be raised, if it could not
};

// Sets the soft RLIMIT_NOFILE to the hard limit; returns the limits now in force.
FdLimit raiseFdLimit();

// Open HTTP connections allowed on all ports together for a soft limit: half of what is left
// after a reserve of 256 descriptors, between 64 and 16384.
size_t httpConnectionBudget(uint64_t softLimit);

}  // namespace kpn::net
