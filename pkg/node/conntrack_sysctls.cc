#include "pkg/node/conntrack_sysctls.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "pkg/node/sysctl_file.h"

namespace kpn::node {

int64_t conntrackMax(const config::Conntrack& c, int cpus) {
  if (c.maxPerCore <= 0) return 0;
  return std::max<int64_t>(static_cast<int64_t>(c.maxPerCore) * cpus, c.min);
}

int usableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

ConntrackSysctls::ConntrackSysctls(std::string procSys, std::string sys) : procSys_(std::move(procSys)), sys_(std::move(sys)) {}

void ConntrackSysctls::set(const std::string& path, const std::string& name, int64_t value, SysctlReport& r) const {
  auto current = readIntFile(path);
  if (current && *current == value) return;
  if (auto err = writeIntFile(path, value)) {
    r.warnings.push_back("cannot set " + name + " to " + std::to_string(value) + " (" + *err + "); the kernel keeps " +
                         (current ? std::to_string(*current) : std::string("its value")));
    return;
  }
  r.changed.push_back(name + ": " + (current ? std::to_string(*current) : std::string("?")) + " -> " + std::to_string(value));
}

SysctlReport ConntrackSysctls::apply(const config::Conntrack& c, int cpus) const {
  SysctlReport r;
  auto netfilter = [&](const char* name, int64_t value) {
    set(procSys_ + "/net/netfilter/" + name, std::string("net.netfilter.") + name, value, r);
  };
  if (int64_t max = conntrackMax(c, cpus); max > 0) {
    netfilter("nf_conntrack_max", max);
    // The hash table: buckets = max/4 as upstream, only ever grown, and only from the initial
    // network namespace (the kernel refuses it elsewhere: then it is a warning like the others).
    std::string hashsize = sys_ + "/module/nf_conntrack/parameters/hashsize";
    auto buckets = readIntFile(hashsize);
    if (!buckets) r.warnings.push_back("cannot read " + hashsize + "; the conntrack hash table keeps its size");
    else if (*buckets < max / 4) set(hashsize, "nf_conntrack hashsize", max / 4, r);
  }
  auto seconds = [](config::Duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); };
  if (seconds(c.tcpEstablishedTimeout) > 0) netfilter("nf_conntrack_tcp_timeout_established", seconds(c.tcpEstablishedTimeout));
  if (seconds(c.tcpCloseWaitTimeout) > 0) netfilter("nf_conntrack_tcp_timeout_close_wait", seconds(c.tcpCloseWaitTimeout));
  if (c.tcpBeLiberal) netfilter("nf_conntrack_tcp_be_liberal", 1);
  if (seconds(c.udpTimeout) > 0) netfilter("nf_conntrack_udp_timeout", seconds(c.udpTimeout));
  if (seconds(c.udpStreamTimeout) > 0) netfilter("nf_conntrack_udp_timeout_stream", seconds(c.udpStreamTimeout));
  return r;
}

}  // namespace kpn::node
