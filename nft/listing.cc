#include "nft/listing.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace kpn::nft {

namespace {

std::string compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string str(const rapidjson::Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

std::vector<std::string> types(const rapidjson::Value& v) {
  std::vector<std::string> out;
  if (v.IsString()) out.push_back(v.GetString());
  if (v.IsArray())
    for (auto& t : v.GetArray())
      if (t.IsString()) out.push_back(t.GetString());
  return out;
}

// Element keys may be wrapped as {"elem":{"val":KEY,"comment":...}}; we compare bare keys.
const rapidjson::Value& unwrapKey(const rapidjson::Value& k) {
  if (k.IsObject()) {
    auto e = k.FindMember("elem");
    if (e != k.MemberEnd() && e->value.IsObject()) {
      auto val = e->value.FindMember("val");
      if (val != e->value.MemberEnd()) return val->value;
    }
  }
  return k;
}

}  // namespace

std::optional<ListedTable> parseListing(const std::string& json, std::string* error) {
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("nftables") || !doc["nftables"].IsArray()) {
    if (error) *error = "unreadable nft listing";
    return std::nullopt;
  }
  ListedTable t;
  for (auto& item : doc["nftables"].GetArray()) {
    if (!item.IsObject()) continue;
    if (item.HasMember("table")) {
      t.exists = true;
    } else if (item.HasMember("chain")) {
      const auto& c = item["chain"];
      ListedChain& lc = t.chains[str(c, "name")];
      if (c.HasMember("hook") && c.HasMember("prio") && c["prio"].IsInt()) {
        lc.hook = Hook{str(c, "type"), str(c, "hook"), c["prio"].GetInt()};
      }
    } else if (item.HasMember("rule")) {
      const auto& r = item["rule"];
      if (!r.HasMember("expr")) continue;
      t.chains[str(r, "chain")].rules.push_back({compact(r["expr"]), str(r, "comment")});
    } else if (item.HasMember("set") || item.HasMember("map")) {
      bool isMap = item.HasMember("map");
      const auto& s = isMap ? item["map"] : item["set"];
      ListedSet& ls = t.sets[str(s, "name")];
      ls.isMap = isMap;
      if (s.HasMember("type")) ls.keyType = types(s["type"]);
      if (isMap) ls.dataType = str(s, "map");
      if (!s.HasMember("elem") || !s["elem"].IsArray()) continue;
      for (auto& e : s["elem"].GetArray()) {
        if (isMap && e.IsArray() && e.Size() == 2) {
          ls.elements[compact(unwrapKey(e[0]))] = compact(e[1]);
        } else {
          ls.elements[compact(unwrapKey(e))] = "";
        }
      }
    }
  }
  return t;
}

}  // namespace kpn::nft
