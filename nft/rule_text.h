// A listed rule's native text from its JSON expression array, as `nft list` would print it, for
// the statements and expressions our tables use. The evaluator traces listings, which carry only
// JSON; people reading a trace want `ip daddr @cluster-ips reject`, not the JSON of it.
#pragma once

#include <string>

namespace kpn::nft {

// The text of a rule's "expr" array; the JSON itself for anything it cannot read.
std::string ruleTextFromJson(const std::string& exprJson);

}  // namespace kpn::nft
