#include "nft/listing.h"
#include "nft/json_read.h"
#include "nft/json_u32.h"

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

std::string elementComment(const rapidjson::Value& k) {
  if (!k.IsObject()) return "";
  auto e = k.FindMember("elem");
  if (e == k.MemberEnd() || !e->value.IsObject()) return "";
  return str(e->value, "comment");
}

// {"elem":{"val":KEY,"timeout":T,"expires":S}}: S, the seconds left; nullopt without one.
std::optional<uint64_t> elementExpires(const rapidjson::Value& k) {
  if (!k.IsObject()) return std::nullopt;
  auto e = k.FindMember("elem");
  if (e == k.MemberEnd() || !e->value.IsObject()) return std::nullopt;
  auto x = e->value.FindMember("expires");
  if (x == e->value.MemberEnd() || !x->value.IsUint64()) return std::nullopt;
  return x->value.GetUint64();
}

// [..., {"dnat":{"family":..,"addr":{"map":{"key":K,"data":"@M"}}}}] where K is a numgen or a
// concat ending with one.
std::optional<ListedNumgenDnat> numgenDnatOf(const rapidjson::Value& expr) {
  if (!expr.IsArray() || expr.Empty()) return std::nullopt;
  const auto& last = expr[expr.Size() - 1];
  if (!last.IsObject()) return std::nullopt;
  auto dn = last.FindMember("dnat");
  if (dn == last.MemberEnd() || !dn->value.IsObject()) return std::nullopt;
  auto addr = dn->value.FindMember("addr");
  if (addr == dn->value.MemberEnd() || !addr->value.IsObject()) return std::nullopt;
  auto map = addr->value.FindMember("map");
  if (map == addr->value.MemberEnd() || !map->value.IsObject()) return std::nullopt;
  auto key = map->value.FindMember("key");
  auto data = map->value.FindMember("data");
  if (key == map->value.MemberEnd() || data == map->value.MemberEnd() || !data->value.IsString() ||
      !key->value.IsObject())
    return std::nullopt;
  const rapidjson::Value* ng = &key->value;
  auto concat = ng->FindMember("concat");
  if (concat != ng->MemberEnd()) {
    if (!concat->value.IsArray() || concat->value.Empty()) return std::nullopt;
    ng = &concat->value[concat->value.Size() - 1];
    if (!ng->IsObject()) return std::nullopt;
  }
  auto n = ng->FindMember("numgen");
  if (n == ng->MemberEnd() || !n->value.IsObject()) return std::nullopt;
  auto mod = n->value.FindMember("mod");
  auto offset = n->value.FindMember("offset");
  if (mod == n->value.MemberEnd() || !mod->value.IsUint()) return std::nullopt;
  std::string m = data->value.GetString();
  if (m.empty() || m[0] != '@') return std::nullopt;
  ListedNumgenDnat out{m.substr(1), mod->value.GetUint(), 0};
  if (offset != n->value.MemberEnd()) out.offset = u32Listed(offset->value).value_or(0);
  return out;
}

}  // namespace

std::optional<SlotKey> splitSlotKey(const std::string& keyJson) {
  rapidjson::Document d;
  if (!readJson(keyJson, d) || !d.IsObject()) return std::nullopt;
  auto c = d.FindMember("concat");
  if (c == d.MemberEnd() || !c->value.IsArray() || c->value.Size() < 2) return std::nullopt;
  const auto& parts = c->value.GetArray();
  if (!parts[parts.Size() - 1].IsUint()) return std::nullopt;
  SlotKey k;
  k.slot = parts[parts.Size() - 1].GetUint();
  for (rapidjson::SizeType i = 0; i + 1 < parts.Size(); ++i) k.prefix.push_back(compact(parts[i]));
  return k;
}

ListedRule listedRule(std::string exprJson, std::string comment) {
  ListedRule r{std::move(exprJson), std::move(comment), std::nullopt};
  rapidjson::Document d;
  if (readJson(r.exprJson, d)) r.numgenDnat = numgenDnatOf(d);
  return r;
}

std::optional<ListedTable> parseListing(const std::string& json, std::string* error) {
  rapidjson::Document doc;
  if (!readJson(json, doc) || !doc.IsObject() || !doc.HasMember("nftables") || !doc["nftables"].IsArray()) {
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
    } else if (item.HasMember("counter") && item["counter"].IsObject()) {
      t.counters.insert(str(item["counter"], "name"));
    } else if (item.HasMember("rule")) {
      const auto& r = item["rule"];
      if (!r.HasMember("expr")) continue;
      t.chains[str(r, "chain")].rules.push_back({compact(r["expr"]), str(r, "comment"), numgenDnatOf(r["expr"])});
    } else if (item.HasMember("set") || item.HasMember("map")) {
      bool isMap = item.HasMember("map");
      const auto& s = isMap ? item["map"] : item["set"];
      ListedSet& ls = t.sets[str(s, "name")];
      ls.isMap = isMap;
      if (s.HasMember("type")) ls.keyType = types(s["type"]);
      if (isMap) ls.dataType = str(s, "map");
      if (s.HasMember("flags") && s["flags"].IsArray())
        for (const auto& f : s["flags"].GetArray()) ls.interval = ls.interval || (f.IsString() && f == "interval");
      if (!s.HasMember("elem") || !s["elem"].IsArray()) continue;
      for (auto& e : s["elem"].GetArray()) {
        const rapidjson::Value& wrapped = isMap && e.IsArray() && e.Size() == 2 ? e[0] : e;
        std::string key = compact(unwrapKey(wrapped));
        std::string comment = elementComment(wrapped);
        if (!comment.empty()) ls.comments[key] = std::move(comment);
        if (auto left = elementExpires(wrapped)) ls.expires[key] = *left;
        ls.elements[std::move(key)] = isMap && e.IsArray() && e.Size() == 2 ? compact(e[1]) : "";
      }
    }
  }
  return t;
}

}  // namespace kpn::nft
