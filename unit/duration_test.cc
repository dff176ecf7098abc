#include <doctest/doctest.h>

#include "pkg/config/duration.h"

using kpn::config::parseGoDuration;
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

TEST_CASE("durations print as Go's time.Duration.String() and read back") {
  using kpn::config::formatGoDuration;
  CHECK(formatGoDuration(nanoseconds(0)) == "0s");
  CHECK(formatGoDuration(seconds(30)) == "30s");
  CHECK(formatGoDuration(hours(24)) == "24h0m0s");
  CHECK(formatGoDuration(minutes(15)) == "15m0s");
  CHECK(formatGoDuration(milliseconds(250)) == "250ms");
  CHECK(formatGoDuration(milliseconds(1500)) == "1.5s");
  CHECK(formatGoDuration(seconds(3661)) == "1h1m1s");
  CHECK(formatGoDuration(microseconds(10)) == "10\u00b5s");
  CHECK(formatGoDuration(nanoseconds(7)) == "7ns");
  CHECK(formatGoDuration(-seconds(5)) == "-5s");
  for (nanoseconds d : {nanoseconds(1), nanoseconds(1234567), nanoseconds(90061000000001LL)})
    CHECK(parseGoDuration(formatGoDuration(d)) == d);
}
