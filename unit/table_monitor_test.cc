// The table monitor's rule for lost events (its socket overflowed, as it does in the storm of
// one of our big commits): they are damage unless every commit in the window is one of ours.
#include <doctest/doctest.h>

#include "nft/kernel/table_monitor.h"

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
