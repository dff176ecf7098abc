#include "nft/kernel/fingerprint_reader.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include <set>

#include "nft/kernel/nfnetlink.h"

namespace kpn::nft {

namespace {
int nfprotoOf(Family f) { return f == Family::IPv4 ? NFPROTO_IPV4 : NFPROTO_IPV6; }
}  // namespace

std::optional<uint32_t> readGeneration(std::string* error) {
  std::optional<uint32_t> gen;
  bool ok = nfnl::request(NFT_MSG_GETGEN, NFPROTO_UNSPEC, false, [&](const nlmsghdr* h) {
    if (const nlattr* id = nfnl::findAttr(h, NFTA_GEN_ID)) gen = nfnl::be32Attr(id);
  }, error);
  if (ok && !gen) *error = "the kernel's generation answer has no id";
  return ok ? gen : std::nullopt;
}

std::optional<std::map<TableId, TableCounts>> readTableCounts(const std::vector<TableId>& tables, std::string* error) {
  std::map<TableId, TableCounts> out;
  std::set<Family> families;
  for (const auto& t : tables) {
    out[t];
    families.insert(t.first);
  }
  for (Family f : families) {
    // NFTA_CHAIN_TABLE and NFTA_SET_TABLE are both attribute 1.
    for (int msg : {NFT_MSG_GETCHAIN, NFT_MSG_GETSET}) {
      bool ok = nfnl::request(msg, nfprotoOf(f), true, [&](const nlmsghdr* h) {
        const nlattr* table = nfnl::findAttr(h, NFTA_CHAIN_TABLE);
        if (!table) return;
        auto it = out.find({f, nfnl::stringAttr(table)});
        if (it == out.end()) return;
        ++(msg == NFT_MSG_GETCHAIN ? it->second.chains : it->second.sets);
      }, error);
      if (!ok) return std::nullopt;
    }
  }
  return out;
}

}  // namespace kpn::nft
