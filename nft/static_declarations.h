// The start-up declarations of a ruleset (the tables, the typeof maps and data-path sets nft 1.0.6
// JSON cannot declare, the named counters) as native nft text: what Runner::declareStatic sends
// and --dry-run prints before the transaction.
#pragma once

#include <string>

#include "nft/model.h"

namespace kpn::nft {

std::string staticDeclarationsText(const Ruleset& rs);

}  // namespace kpn::nft
