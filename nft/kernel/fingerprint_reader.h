// Reads the kernel fingerprint (nft/kernel_fingerprint.h) in this process, over a plain netlink
// socket: no libnftables, no cache.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nft/kernel_fingerprint.h"

namespace kpn::nft {

// Over a plain netlink socket: one request for the generation, one dump of chains and one of sets
// per family (names only, no rules or elements). nullopt with *error when the kernel cannot be
// asked (no descriptor left, no nftables).
std::optional<uint32_t> readGeneration(std::string* error);
std::optional<std::map<TableId, TableCounts>> readTableCounts(const std::vector<TableId>& tables, std::string* error);

}  // namespace kpn::nft
