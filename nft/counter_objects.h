// The named counter objects of one of our tables (Table::counters), read over a plain netlink
// socket: one dump of the family's objects, no libnftables, no cache, cheap enough for every
// Prometheus scrape (upstream's nft-counter collector lists them at scrape time too).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "nft/model.h"

namespace kpn::nft {

// name -> packets, for the counters of table `table` in family f; an absent table gives an empty
// map. nullopt with *error when the kernel cannot be asked.
std::optional<std::map<std::string, uint64_t>> readCounterPackets(Family f, const std::string& table, std::string* error);

}  // namespace kpn::nft
