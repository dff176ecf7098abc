// What our tables hold in the kernel, parsed from `nft -j list table` output. Used once at start-up
// (to keep what already matches) and before a full resync (to find stale objects). Only our own
// tables are ever listed or parsed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

struct ListedRule {
  std::string exprJson;  // compact, re-serialised from the listing: compares with Rule::exprJson
  std::string comment;
};

struct ListedChain {
  std::optional<Hook> hook;
  std::vector<ListedRule> rules;
};

struct ListedSet {
  bool isMap = false;
  std::vector<std::string> keyType;  // as listed; "integer" for our typeof maps
  std::string dataType;              // "verdict", or e.g. "ipv4_addr . inet_service"
  std::map<std::string, std::string, std::less<>> elements;  // key json -> value json ("" for sets)
};

struct ListedTable {
  bool exists = false;
  // Transparent comparators: the diff looks names up by string_view.
  std::map<std::string, ListedChain, std::less<>> chains;
  std::map<std::string, ListedSet, std::less<>> sets;
};

// Parses the JSON that `list table <family> <name>` prints. Returns nullopt (and sets *error) on
// output it cannot read; an absent table is represented by the caller as exists=false.
std::optional<ListedTable> parseListing(const std::string& json, std::string* error);

}  // namespace kpn::nft
