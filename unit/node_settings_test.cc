// Conntrack sysctls and oomScoreAdj against a temporary /proc/sys and /sys.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "pkg/node/conntrack_sysctls.h"
#include "pkg/node/oom_score.h"
#include "pkg/node/sysctl_file.h"

using namespace kpn::node;
using namespace std::chrono;

namespace {

struct FakeRoots {
  std::string dir;
  FakeRoots() {
    char tmpl[] = "/tmp/kpn-sysctl-XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    dir = tmpl;
    REQUIRE(std::system(("mkdir -p " + dir + "/proc/net/netfilter " + dir + "/sys/module/nf_conntrack/parameters").c_str()) == 0);
  }
  ~FakeRoots() { std::system(("rm -rf " + dir).c_str()); }
  std::string proc(const std::string& name) const { return dir + "/proc/net/netfilter/" + name; }
  std::string hashsize() const { return dir + "/sys/module/nf_conntrack/parameters/hashsize"; }
  void write(const std::string& path, const std::string& text) const { std::ofstream(path) << text; }
  ConntrackSysctls sysctls() const { return ConntrackSysctls(dir + "/proc", dir + "/sys"); }
};

}  // namespace

TEST_CASE("conntrack: nf_conntrack_max is max(maxPerCore x CPUs, min); 0 leaves it alone") {
  kpn::config::Conntrack c;
  CHECK(conntrackMax(c, 2) == 131072);       // 2 x 32768 < min
  CHECK(conntrackMax(c, 8) == 8 * 32768);    // scaled above the floor
  c.maxPerCore = 0;
  CHECK(conntrackMax(c, 64) == 0);           // leave as is, min ignored
  CHECK(usableCpus() >= 1);
}

TEST_CASE("conntrack: the sysctls upstream sets, written only when different") {
  FakeRoots r;
  for (const char* f : {"nf_conntrack_max", "nf_conntrack_tcp_timeout_established", "nf_conntrack_tcp_timeout_close_wait",
                        "nf_conntrack_tcp_be_liberal", "nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream"})
    r.write(r.proc(f), "7\n");
  r.write(r.proc("nf_conntrack_tcp_timeout_close_wait"), "3600\n");  // already right: untouched
  r.write(r.hashsize(), "1024\n");
  kpn::config::Conntrack c;
  c.maxPerCore = 65536;
  c.tcpBeLiberal = true;
  c.udpTimeout = seconds(30);
  c.udpStreamTimeout = minutes(2);
  SysctlReport rep = r.sysctls().apply(c, 4);
  CHECK(rep.warnings.empty());
  CHECK(readIntFile(r.proc("nf_conntrack_max")) == 4 * 65536);
  CHECK(readIntFile(r.hashsize()) == 65536);  // max / 4
  CHECK(readIntFile(r.proc("nf_conntrack_tcp_timeout_established")) == 86400);
  CHECK(readIntFile(r.proc("nf_conntrack_tcp_timeout_close_wait")) == 3600);
  CHECK(readIntFile(r.proc("nf_conntrack_tcp_be_liberal")) == 1);
  CHECK(readIntFile(r.proc("nf_conntrack_udp_timeout")) == 30);
  CHECK(readIntFile(r.proc("nf_conntrack_udp_timeout_stream")) == 120);
  CHECK(rep.changed.size() == 6);  // close-wait was already 3600
  CHECK(rep.changed[0] == "net.netfilter.nf_conntrack_max: 7 -> 262144");
  // A second run finds nothing to do.
  CHECK(r.sysctls().apply(c, 4).changed.empty());
}

TEST_CASE("conntrack: zero leaves a setting alone; the hash table only grows") {
  FakeRoots r;
  r.write(r.proc("nf_conntrack_max"), "5\n");
  r.write(r.proc("nf_conntrack_tcp_timeout_established"), "5\n");
  r.write(r.proc("nf_conntrack_udp_timeout"), "5\n");
  r.write(r.hashsize(), "1000000\n");
  kpn::config::Conntrack c;
  c.maxPerCore = 1;
  c.min = 1000;
  c.tcpEstablishedTimeout = seconds(0);
  c.tcpCloseWaitTimeout = seconds(0);
  SysctlReport rep = r.sysctls().apply(c, 2);
  CHECK(readIntFile(r.proc("nf_conntrack_max")) == 1000);
  CHECK(readIntFile(r.hashsize()) == 1000000);
  CHECK(readIntFile(r.proc("nf_conntrack_tcp_timeout_established")) == 5);
  CHECK(readIntFile(r.proc("nf_conntrack_udp_timeout")) == 5);
  CHECK(rep.changed.size() == 1);
  CHECK(rep.warnings.empty());
  c.maxPerCore = 0;
  r.write(r.proc("nf_conntrack_max"), "5\n");
  r.sysctls().apply(c, 2);
  CHECK(readIntFile(r.proc("nf_conntrack_max")) == 5);
}

TEST_CASE("conntrack: a read-only or missing sysctl is a warning naming it, the rest still applies") {
  FakeRoots r;
  // No nf_conntrack_max (module not loaded) and no hashsize; an established timeout that cannot
  // be written, even by root (a directory: EISDIR; the real read-only case is in e2e/test_80).
  REQUIRE(mkdir(r.proc("nf_conntrack_tcp_timeout_established").c_str(), 0755) == 0);
  r.write(r.proc("nf_conntrack_tcp_timeout_close_wait"), "5\n");
  kpn::config::Conntrack c;
  SysctlReport rep = r.sysctls().apply(c, 1);
  CHECK(readIntFile(r.proc("nf_conntrack_tcp_timeout_close_wait")) == 3600);
  REQUIRE(rep.warnings.size() == 3);
  CHECK(rep.warnings[0] == "cannot set net.netfilter.nf_conntrack_max to 131072 (No such file or directory); the kernel keeps its value");
  CHECK(rep.warnings[1].rfind("cannot read " + r.hashsize(), 0) == 0);
  CHECK(rep.warnings[2] == "cannot set net.netfilter.nf_conntrack_tcp_timeout_established to 86400 (Is a directory); the kernel keeps its value");
}

TEST_CASE("oomScoreAdj: written when different; failure is a warning") {
  FakeRoots r;
  std::string path = r.dir + "/oom_score_adj";
  r.write(path, "0\n");
  CHECK_FALSE(setOomScoreAdj(-999, path));
  CHECK(readIntFile(path) == -999);
  auto w = setOomScoreAdj(-999, r.dir + "/missing/oom_score_adj");
  REQUIRE(w);
  CHECK(w->rfind("oomScoreAdj: cannot write -999 to ", 0) == 0);
}
