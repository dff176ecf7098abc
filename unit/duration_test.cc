#include <doctest/doctest.h>

#include "pkg/sync/duration.h"

using kpn::sync::parseGoDuration;
using namespace std::chrono;

TEST_CASE("durations use Go syntax, as upstream's flags do") {
  CHECK(parseGoDuration("0") == nanoseconds(0));
  CHECK(parseGoDuration("0s") == nanoseconds(0));
  CHECK(parseGoDuration("250ms") == milliseconds(250));
  CHECK(parseGoDuration("1m30s") == seconds(90));
  CHECK(parseGoDuration("1.5h") == minutes(90));
  CHECK(parseGoDuration("10us") == microseconds(10));
  CHECK_FALSE(parseGoDuration(""));
  CHECK_FALSE(parseGoDuration("5"));
  CHECK_FALSE(parseGoDuration("1d"));
  CHECK_FALSE(parseGoDuration("-1s"));
  CHECK_FALSE(parseGoDuration("ms"));
}
