// process_* metrics as Prometheus' client libraries export them (names, types, meaning), read
// from /proc/self at each scrape.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace kpn::metrics {

struct ProcessSample {
  double cpuSeconds = 0;       // user + system
  double residentBytes = 0;
  double virtualBytes = 0;
  double startTimeSeconds = 0;  // since the Unix epoch
  double openFds = 0;
  double maxFds = 0;
};

// Parses /proc/self/stat's text (the fields after the parenthesised command name may contain
// anything before the last ')'); clockTicks and pageSize from sysconf, bootTime from /proc/stat.
bool parseProcStat(const std::string& stat, double clockTicks, double pageSize, double bootTime, ProcessSample* out);

std::vector<prometheus::MetricFamily> collectProcessMetrics();

}  // namespace kpn::metrics
