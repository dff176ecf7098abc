#include "pkg/net/fd_limit.h"

#include <doctest/doctest.h>
#include <sys/resource.h>

using kpn::net::httpConnectionBudget;

TEST_CASE("fd limit: HTTP connections get half of what is left after the reserve, within bounds") {
  CHECK(httpConnectionBudget(1024) == 384);
  CHECK(httpConnectionBudget(4096) == 1920);
  CHECK(httpConnectionBudget(256) == 64);     // nothing left: the floor
  CHECK(httpConnectionBudget(0) == 64);
  CHECK(httpConnectionBudget(1048576) == 16384);  // a container's usual hard limit: the ceiling
}

TEST_CASE("fd limit: the soft limit is raised to the hard one") {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  auto got = kpn::net::raiseFdLimit();
  rlimit after{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &after) == 0);
  CHECK(got.error == "");
  CHECK(after.rlim_cur == before.rlim_max);
  CHECK(got.soft == after.rlim_cur);
  CHECK(got.hard == before.rlim_max);
  CHECK(got.raised == (before.rlim_cur < before.rlim_max));
}
