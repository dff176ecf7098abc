#include "nft/kernel/cache_scope.h"

#include <dlfcn.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cstring>

namespace kpn::nft {
namespace {

std::vector<ScopedTable>& scopeStorage() {
  static std::vector<ScopedTable> scope;
  return scope;
}

constexpr uint16_t kTableNameAttr = 1;  // NFTA_{TABLE_NAME,CHAIN_TABLE,SET_TABLE,RULE_TABLE,OBJ_TABLE,FLOWTABLE_TABLE}

}  // namespace

void setCacheScope(std::vector<ScopedTable> tables) { scopeStorage() = std::move(tables); }
const std::vector<ScopedTable>& cacheScope() { return scopeStorage(); }

bool messageInScope(const nlmsghdr* nlh, const std::vector<ScopedTable>& scope) {
  if (scope.empty()) return true;
  const size_t header = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  if (nlh->nlmsg_len < header) return true;
  const auto* base = reinterpret_cast<const unsigned char*>(nlh);
  const auto* gen = reinterpret_cast<const nfgenmsg*>(base + NLMSG_HDRLEN);
  size_t pos = header;
  while (pos + NLA_HDRLEN <= nlh->nlmsg_len) {
    nlattr attr;
    std::memcpy(&attr, base + pos, sizeof attr);
    if (attr.nla_len < NLA_HDRLEN || pos + attr.nla_len > nlh->nlmsg_len) return true;
    if ((attr.nla_type & NLA_TYPE_MASK) == kTableNameAttr) {
      const char* name = reinterpret_cast<const char*>(base + pos + NLA_HDRLEN);
      size_t len = strnlen(name, attr.nla_len - NLA_HDRLEN);
      for (const ScopedTable& t : scope)
        if (t.family == gen->nfgen_family && t.name.size() == len && std::memcmp(t.name.data(), name, len) == 0)
          return true;
      return false;
    }
    pos += NLA_ALIGN(attr.nla_len);
  }
  return true;
}

}  // namespace kpn::nft

// The interposers: each rejects an out-of-scope object the way a malformed message is rejected
// (-1), which libnftables' dump callbacks answer by freeing the object and going on.
#define KPN_SCOPED_PARSER(fn, object)                                                          \
  extern "C" int fn(const struct nlmsghdr* nlh, struct object* o) {                           \
    using Fn = int (*)(const struct nlmsghdr*, struct object*);                               \
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, #fn));                       \
    if (!kpn::nft::messageInScope(nlh, kpn::nft::cacheScope())) return -1;                 \
    return real ? real(nlh, o) : -1;                                                          \
  }

KPN_SCOPED_PARSER(nftnl_table_nlmsg_parse, nftnl_table)
KPN_SCOPED_PARSER(nftnl_chain_nlmsg_parse, nftnl_chain)
KPN_SCOPED_PARSER(nftnl_set_nlmsg_parse, nftnl_set)
KPN_SCOPED_PARSER(nftnl_rule_nlmsg_parse, nftnl_rule)
KPN_SCOPED_PARSER(nftnl_obj_nlmsg_parse, nftnl_obj)
KPN_SCOPED_PARSER(nftnl_flowtable_nlmsg_parse, nftnl_flowtable)

namespace kpn::nft {
bool cacheScopeActive() {
  return dlsym(RTLD_DEFAULT, "nftnl_chain_nlmsg_parse") == reinterpret_cast<void*>(&::nftnl_chain_nlmsg_parse) &&
         dlsym(RTLD_DEFAULT, "nftnl_table_nlmsg_parse") == reinterpret_cast<void*>(&::nftnl_table_nlmsg_parse);
}
}  // namespace kpn::nft
