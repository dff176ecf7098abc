// Reading nftables netlink messages on a plain socket (no libmnl): the attributes of one message,
// and a request/answer exchange for dumps. Only for listening and for cheap reads of the kernel's
// state (nft/kernel/table_monitor.h, nft/kernel/fingerprint_reader.h); every change goes through libnftables.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <string>

namespace kpn::nft::nfnl {

// The attribute of `type` in an nftables message (after its nfgenmsg), nullptr if absent.
const nlattr* findAttr(const nlmsghdr* h, int type);
std::string stringAttr(const nlattr* a);
uint32_t be32Attr(const nlattr* a);  // 0 when too short
// The attribute of `type` inside a nested attribute, nullptr if absent.
const nlattr* findNested(const nlattr* parent, int type);

// Sends one nftables request (msgType: NFT_MSG_GET*, family: NFPROTO_*) on this thread's socket
// (opened once, kept: see nfnetlink.cc) and calls `each` for every message of the answer, until
// the dump ends; `each` must not make a request itself. False (with *error) on any failure.
bool request(int msgType, int family, bool dump, const std::function<void(const nlmsghdr*)>& each, std::string* error);

}  // namespace kpn::nft::nfnl
