#include "nft/chain_list.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "nft/nfnetlink.h"

namespace kpn::nft {

namespace {

const char* familyText(int f) {
  switch (f) {
    case NFPROTO_IPV4: return "ip";
    case NFPROTO_IPV6: return "ip6";
    case NFPROTO_INET: return "inet";
    case NFPROTO_BRIDGE: return "bridge";
    case NFPROTO_NETDEV: return "netdev";
    case NFPROTO_ARP: return "arp";
    default: return "unknown";
  }
}

// The hook numbers of the ip, ip6, inet and bridge families are netfilter's NF_INET_*; netdev's
// and arp's have their own.
std::string hookText(int family, uint32_t n) {
  if (family == NFPROTO_NETDEV) return n == 0 ? "ingress" : n == 1 ? "egress" : "hook " + std::to_string(n);
  if (family == NFPROTO_ARP) return n == 0 ? "input" : n == 1 ? "output" : "hook " + std::to_string(n);
  static const char* names[] = {"prerouting", "input", "forward", "output", "postrouting", "ingress"};
  return n < 6 ? names[n] : "hook " + std::to_string(n);
}

}  // namespace

std::optional<std::vector<ListedChainInfo>> listChains(std::string* error) {
  std::vector<ListedChainInfo> out;
  bool ok = nfnl::request(NFT_MSG_GETCHAIN, NFPROTO_UNSPEC, true, [&](const nlmsghdr* h) {
    const nlattr* hook = nfnl::findAttr(h, NFTA_CHAIN_HOOK);
    const nlattr* table = nfnl::findAttr(h, NFTA_CHAIN_TABLE);
    const nlattr* name = nfnl::findAttr(h, NFTA_CHAIN_NAME);
    if (!table || !name) return;
    const auto* g = reinterpret_cast<const nfgenmsg*>(NLMSG_DATA(h));
    ListedChainInfo c;
    c.family = familyText(g->nfgen_family);
    c.table = nfnl::stringAttr(table);
    c.chain = nfnl::stringAttr(name);
    c.base = hook != nullptr;
    if (!c.base) {
      out.push_back(std::move(c));
      return;
    }
    if (const nlattr* t = nfnl::findAttr(h, NFTA_CHAIN_TYPE)) c.type = nfnl::stringAttr(t);
    if (const nlattr* num = nfnl::findNested(hook, NFTA_HOOK_HOOKNUM)) c.hook = hookText(g->nfgen_family, nfnl::be32Attr(num));
    if (const nlattr* prio = nfnl::findNested(hook, NFTA_HOOK_PRIORITY))
      c.priority = static_cast<int32_t>(nfnl::be32Attr(prio));
    const nlattr* policy = nfnl::findAttr(h, NFTA_CHAIN_POLICY);
    c.policy = policy && nfnl::be32Attr(policy) == NF_DROP ? "drop" : "accept";
    out.push_back(std::move(c));
  }, error);
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace kpn::nft
