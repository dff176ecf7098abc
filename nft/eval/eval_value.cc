#include "nft/eval/eval_value.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "nft/json_text.h"

namespace kpn::nft::eval {

namespace {

std::string jsonOf(const rapidjson::Value& v) {
  if (v.IsString()) return jsonString(v.GetString());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsObject() && v.MemberCount() > 0) return std::string("{\"") + v.MemberBegin()->name.GetString() + "\":…}";
  return "a JSON value of another kind";
}

uint64_t readNumber(const rapidjson::Value& json) {
  if (json.IsUint64()) return json.GetUint64();
  if (json.IsString()) {
    const char* s = json.GetString();
    char* end = nullptr;
    unsigned long long n = std::strtoull(s, &end, 0);
    if (*s && end && *end == '\0') return n;
  }
  throw Unsupported("a number was expected, not " + jsonOf(json));
}

uint64_t l4protoNumber(const std::string& s) {
  if (s == "tcp") return 6;
  if (s == "udp") return 17;
  if (s == "sctp") return 132;
  if (s == "icmp") return 1;
  if (s == "icmpv6" || s == "ipv6-icmp") return 58;
  throw Unsupported("unknown protocol name \"" + s + "\"");
}

// Flags from one name or an array of names.
uint64_t readFlags(const rapidjson::Value& json, uint64_t (*bit)(const std::string&)) {
  if (json.IsString()) return bit(json.GetString());
  if (json.IsArray()) {
    uint64_t out = 0;
    for (const auto& n : json.GetArray()) out |= readFlags(n, bit);
    return out;
  }
  return readNumber(json);
}

bool lessEq(const Atom& a, const Atom& b) {
  if (a.type == AtomType::Address) return a.v6 == b.v6 && std::memcmp(a.addr.data(), b.addr.data(), 16) <= 0;
  return a.num <= b.num;
}

bool inPrefix(const Atom& a, const Atom& net, int len) {
  if (a.type != AtomType::Address || a.v6 != net.v6) return false;
  for (int i = 0; i < 16 && len > 0; ++i, len -= 8) {
    uint8_t mask = len >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - len));
    if ((a.addr[i] & mask) != (net.addr[i] & mask)) return false;
  }
  return true;
}

bool equal(const Atom& a, const Atom& b) {
  switch (a.type) {
    case AtomType::Address: return a.v6 == b.v6 && a.addr == b.addr;
    case AtomType::IfName:
      // nft's interface-name wildcard: a trailing '*' matches any suffix.
      if (!b.str.empty() && b.str.back() == '*') return a.str.compare(0, b.str.size() - 1, b.str, 0, b.str.size() - 1) == 0;
      return a.str == b.str;
    case AtomType::Symbol: return a.str == b.str;
    default: return a.num == b.num;
  }
}

const rapidjson::Value& unwrapElem(const rapidjson::Value& v) {
  if (v.IsObject()) {
    auto e = v.FindMember("elem");
    if (e != v.MemberEnd() && e->value.IsObject()) {
      auto val = e->value.FindMember("val");
      if (val != e->value.MemberEnd()) return val->value;
    }
  }
  return v;
}

}  // namespace

Atom Atom::integer(uint64_t n, AtomType t) {
  Atom a;
  a.type = t;
  a.num = n;
  return a;
}

Atom Atom::symbol(std::string s, AtomType t) {
  Atom a;
  a.type = t;
  a.str = std::move(s);
  return a;
}

Atom Atom::address(const std::string& text) {
  Atom a;
  a.type = AtomType::Address;
  if (inet_pton(AF_INET, text.c_str(), a.addr.data()) == 1) return a;
  if (inet_pton(AF_INET6, text.c_str(), a.addr.data()) == 1) {
    a.v6 = true;
    return a;
  }
  throw Unsupported("\"" + text + "\" is not an IP address");
}

std::string Atom::text() const {
  switch (type) {
    case AtomType::Address: {
      char buf[INET6_ADDRSTRLEN];
      inet_ntop(v6 ? AF_INET6 : AF_INET, addr.data(), buf, sizeof buf);
      return buf;
    }
    case AtomType::IfName:
    case AtomType::Symbol: return "\"" + str + "\"";
    case AtomType::L4Proto:
      switch (num) {
        case 6: return "tcp";
        case 17: return "udp";
        case 132: return "sctp";
        default: return std::to_string(num);
      }
    default: return std::to_string(num);
  }
}

std::string valueText(const Value& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? " . " : "") + v[i].text();
  return out;
}

uint64_t ctStateBit(const std::string& n) {
  if (n == "invalid") return 1;
  if (n == "established") return 2;
  if (n == "related") return 4;
  if (n == "new") return 8;
  if (n == "untracked") return 64;
  throw Unsupported("unknown ct state \"" + n + "\"");
}

uint64_t ctStatusBit(const std::string& n) {
  static const std::pair<const char*, uint64_t> bits[] = {
      {"expected", 1}, {"seen-reply", 2}, {"assured", 4}, {"confirmed", 8}, {"snat", 16}, {"dnat", 32}, {"dying", 512}};
  for (const auto& [name, bit] : bits)
    if (n == name) return bit;
  throw Unsupported("unknown ct status \"" + n + "\"");
}

Atom readLiteral(const rapidjson::Value& json, AtomType type) {
  switch (type) {
    case AtomType::Address:
      if (!json.IsString()) throw Unsupported("an address was expected, not " + jsonOf(json));
      return Atom::address(json.GetString());
    case AtomType::L4Proto:
      return Atom::integer(json.IsString() && !std::isdigit(static_cast<unsigned char>(*json.GetString()))
                               ? l4protoNumber(json.GetString())
                               : readNumber(json),
                           type);
    case AtomType::CtState: return Atom::integer(readFlags(json, ctStateBit), type);
    case AtomType::CtStatus: return Atom::integer(readFlags(json, ctStatusBit), type);
    case AtomType::IfName:
    case AtomType::Symbol:
      if (!json.IsString()) throw Unsupported("a string was expected, not " + jsonOf(json));
      return Atom::symbol(json.GetString(), type);
    case AtomType::Integer: return Atom::integer(readNumber(json));
  }
  throw Unsupported("unknown atom type");
}

Atom readUntyped(const rapidjson::Value& json) {
  if (json.IsUint64()) return Atom::integer(json.GetUint64());
  if (json.IsString()) {
    try {
      return Atom::address(json.GetString());
    } catch (const Unsupported&) {
      return Atom::symbol(json.GetString());
    }
  }
  throw Unsupported("a literal was expected, not " + jsonOf(json));
}

Value readUntypedValue(const rapidjson::Value& json) {
  const auto& v = unwrapElem(json);
  if (v.IsObject() && v.HasMember("concat") && v["concat"].IsArray()) {
    Value out;
    for (const auto& p : v["concat"].GetArray()) out.push_back(readUntyped(p));
    return out;
  }
  return {readUntyped(v)};
}

bool atomMatches(const Atom& a, const rapidjson::Value& pattern) {
  const auto& p = unwrapElem(pattern);
  if (p.IsObject()) {
    if (p.HasMember("prefix")) {
      const auto& pre = p["prefix"];
      if (!pre.HasMember("addr") || !pre.HasMember("len") || !pre["len"].IsInt())
        throw Unsupported("a prefix without addr/len");
      return inPrefix(a, readLiteral(pre["addr"], AtomType::Address), pre["len"].GetInt());
    }
    if (p.HasMember("range")) {
      const auto& r = p["range"];
      if (!r.IsArray() || r.Size() != 2) throw Unsupported("a range that is not [low, high]");
      Atom lo = readLiteral(r[0], a.type), hi = readLiteral(r[1], a.type);
      return lessEq(lo, a) && lessEq(a, hi);
    }
    throw Unsupported("unsupported expression " + jsonOf(p) + " as a value to compare with");
  }
  if (a.type == AtomType::Address && p.IsString()) {
    Atom b = Atom::address(p.GetString());
    return equal(a, b);
  }
  return equal(a, readLiteral(p, a.type));
}

bool matchesPattern(const Value& v, const rapidjson::Value& pattern) {
  const auto& p = unwrapElem(pattern);
  if (p.IsObject() && p.HasMember("concat")) {
    const auto& parts = p["concat"];
    if (!parts.IsArray() || parts.Size() != v.size()) return false;
    for (rapidjson::SizeType i = 0; i < parts.Size(); ++i)
      if (!atomMatches(v[i], parts[i])) return false;
    return true;
  }
  return v.size() == 1 && atomMatches(v[0], p);
}

std::string atomKey(const Atom& a) {
  switch (a.type) {
    case AtomType::Address: return std::string(a.v6 ? "6" : "4") + std::string(a.addr.begin(), a.addr.end());
    case AtomType::IfName:
    case AtomType::Symbol: return "s" + a.str;
    default: return "n" + std::to_string(a.num);
  }
}

std::string valueKey(const Value& v) {
  std::string out;
  for (const auto& a : v) out += atomKey(a) + '\0';
  return out;
}

bool literalKey(const Value& like, const rapidjson::Value& pattern, std::string* key) {
  const auto& p = unwrapElem(pattern);
  auto one = [&](const Atom& type, const rapidjson::Value& part) {
    if (!part.IsString() && !part.IsNumber()) return false;
    if (type.type == AtomType::IfName && part.IsString() && part.GetStringLength() > 0 &&
        part.GetString()[part.GetStringLength() - 1] == '*')
      return false;
    try {
      *key += atomKey(readLiteral(part, type.type)) + '\0';
      return true;
    } catch (const Unsupported&) {
      return false;
    }
  };
  key->clear();
  if (p.IsObject() && p.HasMember("concat")) {
    const auto& parts = p["concat"];
    if (!parts.IsArray() || parts.Size() != like.size()) return false;
    for (rapidjson::SizeType i = 0; i < parts.Size(); ++i)
      if (!one(like[i], parts[i])) return false;
    return true;
  }
  return like.size() == 1 && one(like[0], p);
}

}  // namespace kpn::nft::eval
