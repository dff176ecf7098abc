#include "nft/static_declarations.h"

#include "nft/transaction.h"

namespace kpn::nft {

std::string staticDeclarationsText(const Ruleset& rs) {
  std::string text;
  for (const Table& t : rs.tables) {
    text += std::string("add table ") + familyName(t.family) + " " + t.name + "\n";
    for (const SetDecl& d : t.sets)
      if (!d.typeofSpec.empty()) text += nativeTypeofDeclaration(t.family, t.name, d) + "\n";
    // `add` of a counter that exists keeps its count (checked with nft 1.0.6 on 6.x kernels).
    for (const std::string& c : t.counters)
      text += std::string("add counter ") + familyName(t.family) + " " + t.name + " " + c + "\n";
  }
  return text;
}

}  // namespace kpn::nft
