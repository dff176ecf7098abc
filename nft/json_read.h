// The one JSON reader of nft/ (and of what builds on it, pkg/iptables): listings as libnftables
// prints them, rules' "expr" arrays and element keys as we wrote or nft listed them. As nftables
// has one writer and one reader, every text that becomes a RapidJSON tree comes through here, so
// that a change of parser settings (flags, limits) is made once. json_text.h is the writer side.
#pragma once

#include <rapidjson/document.h>

#include <string_view>

namespace kpn::nft {

// Parses `text` (all of it: a NUL inside is an error, not the end) into *doc, replacing what doc
// held; doc keeps its allocator. False when the text is not one JSON value: each caller says in
// its own words what it could not read.
bool readJson(std::string_view text, rapidjson::Document& doc);

}  // namespace kpn::nft
