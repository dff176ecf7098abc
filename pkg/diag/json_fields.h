// Reading the daemon's JSON answers (status, state): optional fields with defaults, and the
// answer itself, which may be the daemon's {"error": "..."}.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <string>

namespace kpn::diag::json {

// The member `k`, nullptr when absent, null, or `v` is not an object.
inline const rapidjson::Value* member(const rapidjson::Value& v, const char* k) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(k);
  return it == v.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}
inline std::string str(const rapidjson::Value& v, const char* k) {
  const auto* m = member(v, k);
  return m && m->IsString() ? m->GetString() : "";
}
inline double num(const rapidjson::Value& v, const char* k) {
  const auto* m = member(v, k);
  return m && m->IsNumber() ? m->GetDouble() : 0;
}
inline uint64_t unum(const rapidjson::Value& v, const char* k) {
  const auto* m = member(v, k);
  return m && m->IsUint64() ? m->GetUint64() : 0;
}
inline bool flag(const rapidjson::Value& v, const char* k) {
  const auto* m = member(v, k);
  return m && m->IsBool() && m->GetBool();
}

// Parses an answer into `d`: false with *error when it is not a JSON object or is the daemon's
// error answer.
inline bool parseAnswer(rapidjson::Document& d, const std::string& text, std::string* error) {
  d.Parse(text.c_str(), text.size());
  if (d.HasParseError() || !d.IsObject()) {
    *error = "the daemon's answer is not JSON";
    return false;
  }
  if (const auto* e = member(d, "error")) {
    *error = e->IsString() ? e->GetString() : "the daemon answered with an error";
    return false;
  }
  return true;
}

}  // namespace kpn::diag::json
