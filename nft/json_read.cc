#include "nft/json_read.h"

namespace kpn::nft {

bool readJson(std::string_view text, rapidjson::Document& doc) {
  doc.Parse(text.data(), text.size());
  return !doc.HasParseError();
}

}  // namespace kpn::nft
