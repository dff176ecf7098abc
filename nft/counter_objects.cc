#include "nft/counter_objects.h"

#include <endian.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include <cstring>

#include "nft/nfnetlink.h"

namespace kpn::nft {

namespace {

// The packets attribute inside NFTA_OBJ_DATA (nested NFTA_COUNTER_*); nullopt when absent.
std::optional<uint64_t> packetsOf(const nlattr* data) {
  const char* p = reinterpret_cast<const char*>(data) + NLA_HDRLEN;
  const char* end = reinterpret_cast<const char*>(data) + data->nla_len;
  while (p + NLA_HDRLEN <= end) {
    const auto* a = reinterpret_cast<const nlattr*>(p);
    if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end) return std::nullopt;
    if ((a->nla_type & NLA_TYPE_MASK) == NFTA_COUNTER_PACKETS && a->nla_len >= NLA_HDRLEN + 8) {
      uint64_t be;
      std::memcpy(&be, p + NLA_HDRLEN, 8);
      return be64toh(be);
    }
    p += NLA_ALIGN(a->nla_len);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::map<std::string, uint64_t>> readCounterPackets(Family f, const std::string& table, std::string* error) {
  std::map<std::string, uint64_t> out;
  const int nfproto = f == Family::IPv4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
  bool ok = nfnl::request(NFT_MSG_GETOBJ, nfproto, true, [&](const nlmsghdr* h) {
    const nlattr* t = nfnl::findAttr(h, NFTA_OBJ_TABLE);
    const nlattr* name = nfnl::findAttr(h, NFTA_OBJ_NAME);
    const nlattr* type = nfnl::findAttr(h, NFTA_OBJ_TYPE);
    const nlattr* data = nfnl::findAttr(h, NFTA_OBJ_DATA);
    if (!t || !name || !type || !data || nfnl::be32Attr(type) != NFT_OBJECT_COUNTER) return;
    if (nfnl::stringAttr(t) != table) return;
    if (auto packets = packetsOf(data)) out[nfnl::stringAttr(name)] = *packets;
  }, error);
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace kpn::nft
