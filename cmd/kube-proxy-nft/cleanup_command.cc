#include "cmd/kube-proxy-nft/cleanup_command.h"

#include <glog/logging.h>

#include "nft/iptables_cleanup.h"
#include "nft/kernel_fingerprint.h"
#include "nft/runner.h"
#include "pkg/render/layout.h"

namespace kpn::cmd {

int runCleanup() {
  nft::NftRunner runner;
  int rc = 0;
  // What is there first (names only: cheap even for a table of 10k services), for the log line.
  std::vector<nft::TableId> ours;
  for (auto f : {nft::Family::IPv4, nft::Family::IPv6}) ours.emplace_back(f, render::kTableName);
  std::string countError;
  const auto counts = nft::readTableCounts(ours, &countError);
  for (const nft::TableId& id : ours) {
    const std::string table = std::string(nft::familyName(id.first)) + " " + id.second;
    auto r = runner.deleteTable(id.first, id.second);
    if (!r.ok) {
      LOG(ERROR) << "cleanup: cannot delete table " << table << ": " << r.error;
      rc = 1;
    } else if (!counts) {
      LOG(INFO) << "cleanup: deleted table " << table << " if it was there (" << countError << ")";
    } else if (const nft::TableCounts& c = counts->at(id); c.chains == 0 && c.sets == 0) {
      LOG(INFO) << "cleanup: no table " << table;
    } else {
      LOG(INFO) << "cleanup: deleted table " << table << " (" << c.chains << " chains, " << c.sets << " sets and maps)";
    }
  }
  nft::IptablesCleanupResult leftovers = nft::removeIptablesLeftovers(runner);  // logs what it removed
  if (!leftovers.ok) rc = 1;
  else if (leftovers.chains == 0 && leftovers.jumpRules == 0)
    LOG(INFO) << "cleanup: none of upstream kube-proxy's iptables-mode chains found";
  return rc;
}

}  // namespace kpn::cmd
