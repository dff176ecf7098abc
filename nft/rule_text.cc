#include "nft/rule_text.h"
#include "nft/json_read.h"
#include "nft/json_u32.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <stdexcept>

namespace kpn::nft {

namespace {

using JValue = rapidjson::Value;

struct Unreadable : std::runtime_error {
  Unreadable() : std::runtime_error("unreadable") {}
};

const JValue& body(const JValue& obj, const char** key) {
  if (!obj.IsObject() || obj.MemberCount() != 1) throw Unreadable();
  *key = obj.MemberBegin()->name.GetString();
  return obj.MemberBegin()->value;
}

std::string member(const JValue& obj, const char* key) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd()) return "";
  if (it->value.IsString()) return it->value.GetString();
  if (it->value.IsUint64()) return std::to_string(it->value.GetUint64());
  return "";
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string expr(const JValue& e);

// nft spells a bit operation's operand as the type of what it operates on: a mark in hex
// (`meta mark | 0x00004000`), a plain integer in decimal (`meta length & 2 | 2`).
bool operatesOnMark(const JValue& e) {
  if (!e.IsObject() || e.MemberCount() != 1) return false;
  const std::string k = e.MemberBegin()->name.GetString();
  const JValue& b = e.MemberBegin()->value;
  if ((k == "&" || k == "|" || k == "^") && b.IsArray() && b.Size() == 2) return operatesOnMark(b[0]);
  return (k == "meta" || k == "ct") && member(b, "key") == "mark";
}

std::string list(const JValue& a, const char* sep) {
  if (!a.IsArray()) return expr(a);
  std::string out;
  for (const auto& p : a.GetArray()) out += (out.empty() ? "" : sep) + expr(p);
  return out;
}

std::string expr(const JValue& e) {
  if (e.IsString()) return e.GetString();
  if (e.IsUint64()) return std::to_string(e.GetUint64());
  if (e.IsInt64()) return std::to_string(e.GetInt64());
  if (e.IsArray()) return "{ " + list(e, ", ") + " }";  // ct state { new, ... }
  const char* k = nullptr;
  const JValue& b = body(e, &k);
  std::string key = k;
  if (key == "payload") return member(b, "protocol") + " " + member(b, "field");
  if (key == "meta") return "meta " + member(b, "key");
  if (key == "ct") return "ct " + (b.HasMember("dir") ? member(b, "dir") + " " : "") + member(b, "key");
  if (key == "fib") {
    std::string flags;
    if (b.HasMember("flags")) flags = b["flags"].IsArray() ? list(b["flags"], " . ") : expr(b["flags"]);
    return "fib " + flags + " " + member(b, "result");
  }
  if (key == "numgen") {
    std::string out = "numgen " + member(b, "mode") + " mod " + member(b, "mod");
    auto o = b.FindMember("offset");
    uint32_t offset = o == b.MemberEnd() ? 0 : u32Listed(o->value).value_or(0);
    if (offset != 0) out += " offset " + std::to_string(offset);
    return out;
  }
  if (key == "concat") return list(b, " . ");
  if (key == "prefix") return expr(b["addr"]) + "/" + member(b, "len");
  if (key == "range" && b.IsArray() && b.Size() == 2) return expr(b[0]) + "-" + expr(b[1]);
  if (key == "set") return b.IsArray() ? "{ " + list(b, ", ") + " }" : "{ " + expr(b) + " }";
  if (key == "elem") return expr(b["val"]);
  if (key == "map") return expr(b["key"]) + " map " + expr(b["data"]);
  if ((key == "&" || key == "|" || key == "^") && b.IsArray() && b.Size() == 2)
    return expr(b[0]) + " " + key + " " +
           (b[1].IsUint64() && operatesOnMark(b[0]) ? hex(b[1].GetUint64()) : expr(b[1]));
  if (key == "goto" || key == "jump") return key + " " + member(b, "target");
  if (key == "accept" || key == "drop" || key == "return" || key == "continue") return key;
  throw Unreadable();
}

std::string statement(const JValue& s) {
  const char* k = nullptr;
  const JValue& b = body(s, &k);
  std::string key = k;
  if (key == "match") {
    std::string op = member(b, "op");
    std::string right = expr(b["right"]);
    // A mark, or a bit operation on one, compares with a hex number, spelled out as nft does;
    // other integers, bit operations on them included, in decimal.
    const JValue& left = b["left"];
    bool bitwise = left.IsObject() && (left.HasMember("&") || left.HasMember("|") || left.HasMember("^"));
    if (operatesOnMark(left) && b["right"].IsUint64()) right = hex(b["right"].GetUint64());
    bool implicit = op == "in" || (op == "==" && !bitwise);
    return expr(left) + (implicit ? " " : " " + op + " ") + right;
  }
  if (key == "vmap") return expr(b["key"]) + " vmap " + expr(b["data"]);
  if (key == "jump" || key == "goto") return key + " " + member(b, "target");
  if (key == "accept" || key == "drop" || key == "return" || key == "continue") return key;
  if (key == "counter") return b.IsString() ? "counter name \"" + std::string(b.GetString()) + "\"" : "counter";
  if (key == "log") return "log";
  if (key == "reject") {
    std::string out = "reject";
    // nft lists the default (ICMP / ICMPv6 port unreachable) as a bare reject.
    if (b.IsObject() && b.HasMember("type") && member(b, "expr") != "port-unreachable")
      out += " with " + member(b, "type") + " " + expr(b["expr"]);
    return out;
  }
  if (key == "masquerade") {
    std::string out = "masquerade";
    if (b.IsObject() && b.HasMember("flags")) out += " " + (b["flags"].IsArray() ? list(b["flags"], ",") : expr(b["flags"]));
    return out;
  }
  if (key == "dnat") {
    std::string fam = member(b, "family"), addr = expr(b["addr"]);
    if (b.HasMember("port") && fam == "ip6" && b["addr"].IsString()) addr = "[" + addr + "]";  // as nft lists it
    return "dnat " + (fam.empty() ? "" : fam + " ") + "to " + addr + (b.HasMember("port") ? ":" + expr(b["port"]) : "");
  }
  if (key == "set") {  // update @set { key timeout Ns } (nft itself spells the timeout 10m, 3h)
    const JValue& e = b["elem"];
    std::string what = expr(e);
    if (e.IsObject() && e.HasMember("elem") && e["elem"].IsObject() && e["elem"].HasMember("timeout"))
      what += " timeout " + member(e["elem"], "timeout") + "s";
    return member(b, "op") + " " + member(b, "set") + " { " + what + " }";
  }
  if (key == "mangle") {
    std::string value = b["value"].IsUint64() ? hex(b["value"].GetUint64()) : expr(b["value"]);
    return expr(b["key"]) + " set " + value;
  }
  throw Unreadable();
}

}  // namespace

std::string ruleTextFromJson(const std::string& exprJson) {
  rapidjson::Document d;
  if (!readJson(exprJson, d) || !d.IsArray()) return exprJson;
  try {
    std::string out;
    for (const auto& s : d.GetArray()) out += (out.empty() ? "" : " ") + statement(s);
    return out;
  } catch (const std::exception&) {
    return exprJson;
  }
}

}  // namespace kpn::nft
