// The kernel reads on plain netlink (nft/kernel/nfnetlink.h): one socket per thread, kept open,
// because closing one after a commit that deleted something waits out an RCU grace period in the
// kernel; and a new one wherever the thread's network namespace (or process) is new.
#include <dirent.h>
#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "nft/kernel/fingerprint_reader.h"
#include "unit/netns_child.h"

namespace {

// How many of this process's open files are NETLINK_NETFILTER sockets of the current namespace.
int netfilterSockets() {
  std::set<std::string> inodes;
  std::ifstream table("/proc/net/netlink");
  std::string line;
  std::getline(table, line);  // sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
  while (std::getline(table, line)) {
    std::istringstream f(line);
    std::string sk, eth, skip, inode;
    f >> sk >> eth;
    for (int i = 0; i < 7; ++i) f >> skip;
    f >> inode;
    if (eth == "12") inodes.insert("socket:[" + inode + "]");
  }
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    char target[64] = {};
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(path.c_str(), target, sizeof target - 1) > 0 && inodes.count(target)) ++n;
  }
  closedir(d);
  return n;
}

}  // namespace

TEST_CASE("netlink reads keep one socket per thread, and follow the thread into a new namespace") {
  if (geteuid() != 0) {
    MESSAGE("needs root for network namespaces of its own; not run");
    return;
  }
  std::optional<int> result = kpn::testing::inOwnNetns([] {
    int bits = 0;
    std::string error;
    if (!kpn::nft::readGeneration(&error)) bits |= 1;
    if (netfilterSockets() != 1) bits |= 16;  // the socket outlives the read
    if (std::system("nft add table ip kpn-sock && nft delete table ip kpn-sock") != 0) return 101;
    std::optional<uint32_t> last;
    for (int i = 0; i < 5; ++i) last = kpn::nft::readGeneration(&error);
    if (!last) bits |= 2;
    if (netfilterSockets() != 1) bits |= 4;  // five reads on the one socket
    if (unshare(CLONE_NEWNET) != 0) return kpn::testing::kChildSetupFailed;
    std::optional<uint32_t> fresh = kpn::nft::readGeneration(&error);
    // A fresh namespace's generation is behind one that has seen two commits: the read went to
    // the new namespace, not through the old socket.
    if (!fresh || !last || *fresh >= *last) bits |= 8;
    return bits;
  });
  REQUIRE(result);
  const int bits = *result;
  REQUIRE(bits < kpn::testing::kChildSetupFailed);  // 101: the nft command failed
  CHECK((bits & 1) == 0);   // a generation read
  CHECK((bits & 2) == 0);   // and again, five times
  CHECK((bits & 4) == 0);   // on the one socket
  CHECK((bits & 8) == 0);   // a new namespace, a new socket
  CHECK((bits & 16) == 0);  // the socket outlives the read
}
