#include "pkg/metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace kpn::metrics {

bool parseProcStat(const std::string& stat, double clockTicks, double pageSize, double bootTime, ProcessSample* out) {
  auto close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(stat.substr(close + 1));
  // Fields from 3 (state) on; utime is 14, stime 15, starttime 22, vsize 23, rss 24.
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok) f.push_back(tok);
  if (f.size() < 22) return false;
  auto field = [&](int n) { return std::stod(f[n - 3]); };
  try {
    out->cpuSeconds = (field(14) + field(15)) / clockTicks;
    out->startTimeSeconds = bootTime + field(22) / clockTicks;
    out->virtualBytes = field(23);
    out->residentBytes = field(24) * pageSize;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

namespace {

double bootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  double v = 0;
  while (in >> key) {
    if (key == "btime" && in >> v) return v;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double openFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  double n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream's own fd
}

prometheus::MetricFamily one(const char* name, const char* help, prometheus::MetricType type, double v) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return prometheus::MetricFamily{name, help, type, {m}};
}

}  // namespace

std::vector<prometheus::MetricFamily> collectProcessMetrics() {
  static const double kBoot = bootTime();
  ProcessSample s;
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!parseProcStat(stat, static_cast<double>(sysconf(_SC_CLK_TCK)), static_cast<double>(sysconf(_SC_PAGESIZE)),
                     kBoot, &s))
    return {};
  s.openFds = openFds();
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) s.maxFds = static_cast<double>(rl.rlim_cur);
  using prometheus::MetricType;
  return {
      one("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", MetricType::Counter,
          s.cpuSeconds),
      one("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge, s.maxFds),
      one("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, s.openFds),
      one("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge, s.residentBytes),
      one("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
          s.startTimeSeconds),
      one("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge, s.virtualBytes),
  };
}

}  // namespace kpn::metrics
