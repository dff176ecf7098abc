// nft 1.0.6 lists a 32-bit unsigned field of an expression (numgen's offset) as a signed JSON
// number: `numgen random mod 1 offset 3370014487` reads back as "offset": -924952809. What we send
// is written the same way, so that a rule compares with its own listing as text, and readers take
// either form.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>

namespace kpn::nft {

inline std::string u32Json(uint32_t v) { return std::to_string(static_cast<int32_t>(v)); }

inline std::optional<uint32_t> u32Listed(const rapidjson::Value& v) {
  if (v.IsUint()) return v.GetUint();
  if (v.IsInt()) return static_cast<uint32_t>(v.GetInt());
  return std::nullopt;
}

}  // namespace kpn::nft
