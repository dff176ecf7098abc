// Tiny helpers for writing JSON by hand where the shape is fixed and small.
#pragma once

#include <string>
#include <string_view>

namespace kpn::nft {

// Appends s as a JSON string literal (quotes included), escaping what JSON requires.
void appendJsonString(std::string& out, std::string_view s);
std::string jsonString(std::string_view s);

// Appends s as an nft native-syntax double-quoted string (comments). Characters nft's scanner
// cannot take inside quotes are replaced, so untrusted text can never end the string early.
std::string nftQuoted(std::string_view s);

}  // namespace kpn::nft
