// What our tables hold in the kernel, parsed from `nft -j list table` output. Used once at start-up
// (to keep what already matches) and before a full resync (to find stale objects). Only our own
// tables are ever listed or parsed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

// A rule's final `dnat <family> to <key> map @<map>` whose key is `numgen random mod N offset B`
// alone (the chain-per-service layout before shared dispatch) or ends with it (shared dispatch).
struct ListedNumgenDnat {
  std::string map;  // without the '@'
  uint32_t mod = 0, offset = 0;
  bool operator==(const ListedNumgenDnat& o) const { return map == o.map && mod == o.mod && offset == o.offset; }
};

struct ListedRule {
  std::string exprJson;  // compact, re-serialised from the listing: compares with Rule::exprJson
  std::string comment;
  std::optional<ListedNumgenDnat> numgenDnat;  // typed view of the dnat a rule ends with, if any
};

// A map key `{"concat":[p1,...,pk,slot]}` whose last part is a number: the compact JSON of the
// parts before it (as ex:: builders write them) and the slot. Shared-dispatch backends maps key
// their elements this way (destination . slot).
struct SlotKey {
  std::vector<std::string> prefix;
  uint32_t slot = 0;
};
std::optional<SlotKey> splitSlotKey(const std::string& keyJson);
// A listed rule from its compact expression JSON, with its typed views filled in.
ListedRule listedRule(std::string exprJson, std::string comment);

struct ListedChain {
  std::optional<Hook> hook;
  std::vector<ListedRule> rules;
};

struct ListedSet {
  bool isMap = false;
  std::vector<std::string> keyType;  // as listed; "integer" for our typeof maps
  std::string dataType;              // "verdict", or e.g. "ipv4_addr . inet_service"
  bool interval = false;             // listed with `flags interval`
  std::map<std::string, std::string, std::less<>> elements;  // key json -> value json ("" for sets)
  std::map<std::string, std::string, std::less<>> comments;  // key json -> comment, for elements with one
  // key json -> seconds left, for elements the data path added with a timeout (`expires` of a
  // dynamic set's element: session affinity's entries)
  std::map<std::string, uint64_t, std::less<>> expires;
};

struct ListedTable {
  bool exists = false;
  // Transparent comparators: the diff looks names up by string_view.
  std::map<std::string, ListedChain, std::less<>> chains;
  std::map<std::string, ListedSet, std::less<>> sets;
  std::set<std::string, std::less<>> counters;  // named counter objects
};

// Parses the JSON that `list table <family> <name>` prints. Returns nullopt (and sets *error) on
// output it cannot read; an absent table is represented by the caller as exists=false.
std::optional<ListedTable> parseListing(const std::string& json, std::string* error);

}  // namespace kpn::nft
