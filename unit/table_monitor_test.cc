// The table monitor's rule for lost events (its socket overflowed, as it does in the storm of
// one of our big commits): they are damage unless every commit in the window is one of ours.
#include <doctest/doctest.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "nft/kernel/fingerprint_reader.h"
#include "nft/kernel/table_monitor.h"
#include "unit/netns_child.h"

using kpn::nft::onlyOwnCommitsSince;

TEST_CASE("table monitor: events lost in a window of only our own commits are not damage") {
  CHECK(onlyOwnCommitsSince(10, 10, {}));          // no commit since: nothing lost that matters
  CHECK(onlyOwnCommitsSince(10, 11, {11}));        // our cold sync's storm
  CHECK(onlyOwnCommitsSince(10, 13, {11, 12, 13}));
  CHECK(onlyOwnCommitsSince(10, 12, {9, 11, 12, 40}));  // generations outside the window do not count
}

TEST_CASE("table monitor: one commit in the window that is not ours makes lost events damage") {
  CHECK_FALSE(onlyOwnCommitsSince(10, 11, {}));
  CHECK_FALSE(onlyOwnCommitsSince(10, 12, {12}));     // someone committed 11, then we did
  CHECK_FALSE(onlyOwnCommitsSince(10, 12, {11}));     // we committed 11, someone 12
  CHECK_FALSE(onlyOwnCommitsSince(10, 13, {11, 13}));
  CHECK_FALSE(onlyOwnCommitsSince(10, 9, {9, 10}));   // the reading went backwards: cannot tell
}

// Deaf around a big commit of ours (Runner::onBigCommit), in a network namespace of its own (a
// forked child, unit/netns_child.h: root only): nothing reaches the socket meanwhile, our own
// commit in the window is not damage, anyone else's is, and events arrive again afterwards. The
// child reports each failed expectation as a bit of its exit status.
TEST_CASE("table monitor: deaf during a big commit of ours, outside changes in the window are still damage") {
  if (geteuid() != 0) {
    MESSAGE("needs root for a network namespace of its own; not run");
    return;
  }
  std::optional<int> result = kpn::testing::inOwnNetns([] {
    int bits = 0;
    std::string error;
    kpn::nft::TableMonitor m({{kpn::nft::Family::IPv4, "kpn-deaf"}});
    pollfd p{m.fd(), POLLIN, 0};
    m.deafen();
    auto before = kpn::nft::readGeneration(&error);
    if (std::system("nft add table ip kpn-deaf") != 0) return 101;
    auto after = kpn::nft::readGeneration(&error);
    if (before && after && *after == *before + 1) m.noteOwnCommit(*after);
    else bits |= 1;
    if (poll(&p, 1, 200) != 0) bits |= 2;  // the kernel sent us nothing for it
    m.listen();
    if (m.drain()) bits |= 4;  // only our commit in the window: no damage
    m.deafen();
    if (std::system("nft add chain ip kpn-deaf theirs") != 0) return 102;
    m.listen();
    if (!m.drain()) bits |= 8;  // someone else's commit in the window: damage
    if (std::system("nft add chain ip kpn-deaf theirs-too") != 0) return 103;
    if (poll(&p, 1, 2000) != 1) bits |= 16;  // listening again
    if (!m.drain()) bits |= 32;
    // Events of our own commit still queued in the socket when deafen() comes are not damage.
    auto ownCommit = [&](const char* cmd) {
      auto b = kpn::nft::readGeneration(&error);
      if (std::system(cmd) != 0) _exit(104);
      auto a = kpn::nft::readGeneration(&error);
      if (b && a && *a == *b + 1) m.noteOwnCommit(*a);
      else bits |= 1;
    };
    ownCommit("nft add chain ip kpn-deaf ours-queued");
    m.deafen();
    ownCommit("nft add chain ip kpn-deaf ours-big");
    m.listen();
    if (m.drain()) bits |= 64;
    return bits;
  });
  REQUIRE(result);
  const int bits = *result;
  REQUIRE(bits < kpn::testing::kChildSetupFailed);  // 101-104: the nft command failed
  CHECK((bits & 1) == 0);   // our commit moved the generation by one
  CHECK((bits & 2) == 0);   // no event while deaf
  CHECK((bits & 4) == 0);   // our own commit in the window is not damage
  CHECK((bits & 8) == 0);   // another process's commit in the window is damage
  CHECK((bits & 16) == 0);  // events arrive again after listen()
  CHECK((bits & 32) == 0);  // and another process's change is damage
  CHECK((bits & 64) == 0);  // our events queued from before deafen() are not damage
}
