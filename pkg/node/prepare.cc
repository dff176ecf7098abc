#include "pkg/node/prepare.h"

#include <glog/logging.h>

#include "nft/kernel/probe.h"
#include "pkg/node/conntrack_sysctls.h"
#include "pkg/node/oom_score.h"
#include "pkg/render/kernel_requirements.h"

namespace kpn::node {

std::optional<std::string> prepareNode(const config::Loaded& conf, nft::NftRunner& runner) {
  std::vector<nft::Requirement> reqs = render::rulesetRequirements();
  for (const std::string& name : conf.options.probeFakeRequirements) reqs.push_back(nft::fakeRequirement(name));
  const std::string table = nft::scratchTableName();
  nft::ProbeResult probe =
      nft::probeKernel(reqs, table, [&](const std::string& json) { return runner.commitScratch(table, json); });
  runner.endScratch();
  if (!probe.ok) return probe.line();
  for (const std::string& f : probe.unavailable)
    LOG(WARNING) << "start-up probe: the kernel runs no nftables for family " << f << "; this node serves the other family only";
  VLOG(1) << "start-up probe: the kernel has all " << reqs.size() << " requirements of the ruleset";

  if (auto w = setOomScoreAdj(conf.config.oomScoreAdj)) LOG(WARNING) << *w;
  // After the probe: its ct rule has loaded nf_conntrack, so the sysctls exist.
  SysctlReport r = ConntrackSysctls().apply(conf.config.conntrack, usableCpus());
  for (const std::string& c : r.changed) LOG(INFO) << "set " << c;
  for (const std::string& w : r.warnings) LOG(WARNING) << w;
  return std::nullopt;
}

std::future<std::optional<std::string>> prepareNodeInBackground(const config::Loaded& conf, nft::NftRunner& runner,
                                                                std::function<void()> then) {
  // Started here, on the calling thread: a helper gets SIGKILL when the thread that spawned it
  // ends (PR_SET_PDEATHSIG follows the thread, not the process), and the one below ends soon.
  runner.startHelper();
  const int starts = runner.helperStarts();
  return std::async(std::launch::async, [&conf, &runner, starts, then = std::move(then)] {
    std::optional<std::string> err = prepareNode(conf, runner);
    if (!err && then) then();
    // A helper that died meanwhile was started again on this thread: end that one now, and the
    // next call starts its own.
    if (runner.helperStarts() != starts) runner.recycleHelper();
    return err;
  });
}

}  // namespace kpn::node
