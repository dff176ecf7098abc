// What the default verbosity says about syncs: the first one that programmed the node, and the
// first success after failures (each failure is logged where it happens).
#include "unit/log_capture.h"
#include <doctest/doctest.h>

#include "pkg/state/cluster_state.h"
#include "pkg/sync/sync_log.h"

using namespace kpn;
using namespace std::chrono_literals;

namespace {

sync::SyncReport report(bool ok, size_t ops, int failuresInARow) {
  sync::SyncReport r;
  r.stats.ok = ok;
  r.stats.ops = ops;
  r.stats.renderMs = 1.25;
  r.stats.diffMs = 0.5;
  r.stats.commitMs = 20;
  r.duration = 23456us;
  r.consecutiveFailures = failuresInARow;
  return r;
}

}  // namespace

TEST_CASE("sync log: the first sync with its services, operations and time, then silence until a failure ends") {
  testing::LogCapture logs(google::GLOG_INFO);
  state::ClusterState st;
  st.services["default/a"];
  st.services["default/b"];
  sync::SyncLog log(st);
  log.synced(report(false, 0, 1));  // a failure before the first success: logged by the syncer and the loop
  CHECK(logs.lines().empty());
  log.synced(report(true, 345, 0));
  REQUIRE(logs.lines().size() == 1);
  CHECK(logs.lines()[0] == "first sync done: 2 services, 345 operations in 23.5 ms (render 1.2, diff 0.5, commit 20.0)");
  log.synced(report(true, 4, 0));  // every later sync is the -v=2 line's
  CHECK(logs.lines().size() == 1);
  log.synced(report(false, 0, 1));
  log.synced(report(false, 0, 2));
  log.synced(report(true, 7, 0));
  REQUIRE(logs.lines().size() == 2);
  CHECK(logs.lines()[1] == "sync succeeded after 2 failed attempts: 7 operations in 23.5 ms");
}
