#include "nft/json_text.h"

#include <cstdio>

namespace kpn::nft {

void appendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string jsonString(std::string_view s) {
  std::string out;
  appendJsonString(out, s);
  return out;
}

std::string nftQuoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) out.push_back((c == '"' || c == '\\' || c < 0x20) ? '_' : static_cast<char>(c));
  out.push_back('"');
  return out;
}

}  // namespace kpn::nft
