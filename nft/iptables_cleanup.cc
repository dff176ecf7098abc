#include "nft/iptables_cleanup.h"

#include <glog/logging.h>

#include <fstream>
#include <sstream>

#include "nft/iptables_leftovers.h"

namespace kpn::nft {

namespace {

std::optional<std::string> readFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

IptablesCleanupResult removeIptablesLeftovers(NftRunner& runner) {
  IptablesCleanupResult res;
  if (auto legacy = legacyIptablesReport(readFile)) LOG(WARNING) << *legacy;
  IptablesCleanupPlan plan;
  for (const char* family : {"ip", "ip6"}) {
    for (const char* table : {"nat", "filter", "mangle"}) {
      std::string listing;
      RunResult r = runner.runJson(std::string("{\"nftables\":[{\"list\":{\"table\":{\"family\":\"") + family +
                                       "\",\"name\":\"" + table + "\"}}}]}",
                                   &listing);
      if (!r.ok) {
        if (r.error.find("No such file or directory") != std::string::npos) continue;  // no such table
        res.ok = false;
        res.error = std::string("cannot list table ") + family + " " + table + ": " + r.error;
        LOG(ERROR) << "iptables leftovers: " << res.error;
        return res;
      }
      std::string error;
      if (!planIptablesCleanup(listing, &plan, &error)) {
        res.ok = false;
        res.error = std::string("table ") + family + " " + table + ": " + error;
        LOG(ERROR) << "iptables leftovers: " << res.error;
        return res;
      }
    }
  }
  if (plan.commands.empty()) {
    VLOG(1) << "iptables leftovers: none of upstream kube-proxy's iptables chains found";
    return res;
  }
  RunResult r = runner.runJson(cleanupTransactionJson(plan), nullptr);
  if (!r.ok) {
    res.ok = false;
    res.error = r.error;
    LOG(ERROR) << "iptables leftovers: removing " << plan.chains.size() << " chains and " << plan.jumpRules
               << " jump rules failed: " << r.error;
    return res;
  }
  res.chains = plan.chains.size();
  res.jumpRules = plan.jumpRules;
  std::string names;  // a few, for the log: a big cluster leaves thousands of KUBE-SEP-* chains
  for (size_t i = 0; i < plan.chains.size() && i < 12; ++i) names += (i ? ", " : "") + plan.chains[i];
  if (plan.chains.size() > 12) names += ", ...";
  LOG(INFO) << "removed upstream kube-proxy's iptables leftovers: " << res.jumpRules << " jump rules, "
            << res.chains << " chains (" << names << ")";
  return res;
}

std::function<bool()> iptablesLeftoverCleaner(NftRunner& runner, int attempts) {
  return [&runner, attempts, tried = 0]() mutable {
    if (removeIptablesLeftovers(runner).ok) return true;
    if (++tried < attempts) return false;
    LOG(ERROR) << "iptables leftovers: giving up after " << tried << " attempts; see docs/migration.md";
    return true;
  };
}

}  // namespace kpn::nft
