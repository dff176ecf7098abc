// The conntrack sysctls upstream sets at start-up (cmd/kube-proxy/app/conntrack.go and
// server_linux.go): nf_conntrack_max = max(maxPerCore x CPUs, min) (maxPerCore 0: left alone),
// then the hash table grown to max/4 buckets if smaller (a module parameter: init netns only);
// the TCP established and close-wait timeouts, be_liberal and the two UDP timeouts (0: left
// alone). Each is written only when the kernel's value differs. A failure (read-only /proc/sys in
// an unprivileged container, a file the kernel does not have, a netns where it is read-only) is
// a warning: the daemon runs on with the kernel's value, never exits over it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::node {

// upstream's getConntrackMax: 0 means "leave nf_conntrack_max alone".
int64_t conntrackMax(const config::Conntrack& c, int cpus);

// The CPUs this process may run on (Go's runtime.NumCPU, what upstream multiplies by).
int usableCpus();

struct SysctlReport {
  std::vector<std::string> changed;   // "net/netfilter/nf_conntrack_max: 131072 -> 262144"
  std::vector<std::string> warnings;  // one line per setting that could not be applied
};

class ConntrackSysctls {
 public:
  // Roots are injectable so that unit tests work on a temporary directory.
  explicit ConntrackSysctls(std::string procSys = "/proc/sys", std::string sys = "/sys");
  SysctlReport apply(const config::Conntrack& c, int cpus) const;

 private:
  void set(const std::string& path, const std::string& name, int64_t value, SysctlReport& r) const;
  std::string procSys_, sys_;
};

}  // namespace kpn::node
