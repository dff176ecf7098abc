#include "pkg/iptables/iptables_cleanup.h"

#include <glog/logging.h>

#include <fstream>
#include <sstream>

#include "pkg/iptables/iptables_leftovers.h"

namespace kpn::iptables {

namespace {

std::optional<std::string> readFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

IptablesCleanupResult removeWithHelper(nft::NftRunner& runner);

}  // namespace

IptablesCleanupResult removeIptablesLeftovers(nft::NftRunner& runner) {
  IptablesCleanupResult res = removeWithHelper(runner);
  runner.releaseIptablesHelper();
  return res;
}

namespace {

IptablesCleanupResult removeWithHelper(nft::NftRunner& runner) {
  IptablesCleanupResult res;
  if (auto legacy = legacyIptablesReport(readFile)) LOG(WARNING) << *legacy;
  IptablesCleanupPlan plan;
  // Chain names first, then the rules of only the chains that are not upstream's (a few): the
  // rules of 100k upstream chains would take minutes to list, all of it in their xt matches.
  auto add = [&](const std::string& cmd, const std::string& what) {
    std::string listing, error;
    nft::RunResult r = runner.runJson(cmd, &listing);
    if (!r.ok && r.error.find("No such file or directory") != std::string::npos) return true;  // gone meanwhile
    if (r.ok && addIptablesListing(listing, &plan, &error)) return true;
    res.ok = false;
    res.error = "cannot list " + what + ": " + (r.ok ? error : r.error);
    LOG(ERROR) << "iptables leftovers: " << res.error;
    return false;
  };
  for (const char* family : {"ip", "ip6"})
    if (!add(listChainsCommand(family), std::string("the chains of ") + family)) return res;
  const auto others = plan.otherChains;
  for (const auto& c : others)
    if (!add(listChainCommand(c), "chain " + c.family + " " + c.table + " " + c.name)) return res;
  const IptablesCleanupCommands todo = cleanupCommands(plan);
  for (const auto& c : todo.kept)
    LOG(WARNING) << "iptables leftovers: keeping " << c.family << " " << c.table << " " << c.name
                 << (c.name == "KUBE-MARK-MASQ" ? "" : ", emptied of upstream's rules,")
                 << ": a rule that is not upstream kube-proxy's jumps to it";
  if (todo.ruleDeletes.empty() && todo.chainFlushes.empty() && todo.chainDeletes.empty()) {
    VLOG(1) << "iptables leftovers: nothing of upstream kube-proxy's iptables chains to remove";
    return res;
  }
  nft::RunResult r = runner.runJson(cleanupTransactionJson(plan), nullptr);
  if (!r.ok) {
    res.ok = false;
    res.error = r.error;
    LOG(ERROR) << "iptables leftovers: removing " << todo.chainDeletes.size() << " chains and " << plan.jumpRules
               << " jump rules failed: " << r.error;
    return res;
  }
  res.chains = todo.chainDeletes.size();
  res.jumpRules = plan.jumpRules;
  std::string names;  // a few, for the log: a big cluster leaves thousands of KUBE-SEP-* chains
  size_t named = 0;
  for (const auto& c : plan.upstreamChains) {
    if (plan.referenced.count(c)) continue;
    if (named++ == 12) {
      names += ", ...";
      break;
    }
    names += (named > 1 ? ", " : "") + c.family + " " + c.table + " " + c.name;
  }
  LOG(INFO) << "removed upstream kube-proxy's iptables leftovers: " << res.jumpRules << " jump rules, "
            << res.chains << " chains (" << names << ")";
  return res;
}

}  // namespace

std::function<bool()> iptablesLeftoverCleaner(nft::NftRunner& runner, int attempts) {
  return [&runner, attempts, tried = 0]() mutable {
    if (removeIptablesLeftovers(runner).ok) return true;
    if (++tried < attempts) return false;
    LOG(ERROR) << "iptables leftovers: giving up after " << tried << " attempts; see docs/migration.md";
    return true;
  };
}

}  // namespace kpn::iptables
