// The evaluator's input: one family's table as chains (with hooks) and set/map elements, taken
// either from our model (what the renderer wants) or from a kernel listing (what is there), so
// that the same interpreter traces both.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nft/listing.h"
#include "nft/model.h"

namespace kpn::nft::eval {

struct TableRule {
  std::string exprJson;
  std::string text;  // native text when known (our model); empty for a listing
  std::string comment;
};

struct TableChain {
  std::string name;
  std::optional<Hook> hook;
  std::vector<TableRule> rules;
};

struct TableSet {
  std::vector<std::pair<std::string, std::string>> elements;  // key JSON, value JSON ("" for sets)
  std::map<std::string, std::string, std::less<>> comments;   // key JSON -> comment, where it has one
  // key JSON -> seconds left: the elements a listing shows the data path added with a timeout
  // (session affinity's entries); empty for our model, which has no kernel entries
  std::map<std::string, uint64_t, std::less<>> expires;
};

struct EvalTable {
  Family family = Family::IPv4;
  std::string name;
  std::map<std::string, TableChain, std::less<>> chains;
  std::map<std::string, TableSet, std::less<>> sets;
};

EvalTable tableFromModel(const Table& t);
EvalTable tableFromListing(Family family, const std::string& name, const ListedTable& t);

}  // namespace kpn::nft::eval
