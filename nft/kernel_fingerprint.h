// A cheap fingerprint of what the kernel holds for our tables: the ruleset generation (bumped by
// every commit of anyone) and, per table of ours, how many chains and sets it has. The syncer
// takes one after each commit; a periodic sync compares and falls back to a full sync (a listing
// of the kernel) when it differs, for damage the table monitor's events did not report.
// The values only: nft/kernel/fingerprint_reader.h reads them from the kernel.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

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

}  // namespace kpn::nft
