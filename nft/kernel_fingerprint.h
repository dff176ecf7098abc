// A cheap fingerprint of what the kernel holds for our tables: the ruleset generation (bumped by
// every commit of anyone) and, per table of ours, how many chains and sets it has. The syncer
// takes one after each commit; a periodic sync compares and falls back to a full sync (a listing
// of the kernel) when it differs, for damage the table monitor's events did not report.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

using TableId = std::pair<Family, std::string>;

struct TableCounts {
  size_t chains = 0, sets = 0;  // an absent table counts 0 and 0
  bool operator==(const TableCounts& o) const { return chains == o.chains && sets == o.sets; }
};

struct KernelFingerprint {
  uint32_t generation = 0;
  std::map<TableId, TableCounts> tables;
};

// Over a plain netlink socket: one request for the generation, one dump of chains and one of sets
// per family (names only, no rules or elements). nullopt with *error when the kernel cannot be
// asked (no descriptor left, no nftables).
std::optional<uint32_t> readGeneration(std::string* error);
std::optional<std::map<TableId, TableCounts>> readTableCounts(const std::vector<TableId>& tables, std::string* error);

}  // namespace kpn::nft
