#include "pkg/node/prepare.h"

#include <glog/logging.h>

#include "nft/probe.h"
#include "pkg/node/conntrack_sysctls.h"
#include "pkg/node/oom_score.h"

namespace kpn::node {

std::optional<std::string> prepareNode(const config::Loaded& conf) {
  std::vector<nft::Requirement> reqs = nft::rulesetRequirements();
  for (const std::string& name : conf.options.probeFakeRequirements) reqs.push_back(nft::fakeRequirement(name));
  nft::ProbeResult probe = nft::probeKernel(reqs, nft::scratchTableName(), nft::runJsonOnce);
  if (!probe.ok) return probe.line();
  VLOG(1) << "start-up probe: the kernel has all " << reqs.size() << " requirements of the ruleset";

  if (auto w = setOomScoreAdj(conf.config.oomScoreAdj)) LOG(WARNING) << *w;
  // After the probe: its ct rule has loaded nf_conntrack, so the sysctls exist.
  SysctlReport r = ConntrackSysctls().apply(conf.config.conntrack, usableCpus());
  for (const std::string& c : r.changed) LOG(INFO) << "set " << c;
  for (const std::string& w : r.warnings) LOG(WARNING) << w;
  return std::nullopt;
}

}  // namespace kpn::node
