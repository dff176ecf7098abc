#include "nft/expr.h"

#include "nft/json_u32.h"

#include <cstdio>

#include "nft/json_text.h"

namespace kpn::nft {

const char* familyName(Family f) { return f == Family::IPv4 ? "ip" : "ip6"; }
const char* addrTypeName(Family f) { return f == Family::IPv4 ? "ipv4_addr" : "ipv6_addr"; }

namespace {
std::string hexMask(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}
Expr binop(const char* jsonOp, const char* textOp, const Expr& e, uint32_t mask) {
  return {std::string("{\"") + jsonOp + "\":[" + e.json + "," + std::to_string(mask) + "]}",
          e.text + " " + textOp + " " + hexMask(mask)};
}
}  // namespace

namespace ex {
Expr payload(const char* protocol, const char* field) {
  return {std::string("{\"payload\":{\"protocol\":\"") + protocol + "\",\"field\":\"" + field + "\"}}",
          std::string(protocol) + " " + field};
}
Expr meta(const char* key) {
  return {std::string("{\"meta\":{\"key\":\"") + key + "\"}}", std::string("meta ") + key};
}
Expr ct(const char* key) {
  return {std::string("{\"ct\":{\"key\":\"") + key + "\"}}", std::string("ct ") + key};
}
Expr symbol(const std::string& s) { return {jsonString(s), s}; }
Expr addr(const std::string& ip) { return {jsonString(ip), ip}; }
Expr number(int64_t n) { return {std::to_string(n), std::to_string(n)}; }
Expr prefix(const std::string& ip, int len) {
  return {"{\"prefix\":{\"addr\":" + jsonString(ip) + ",\"len\":" + std::to_string(len) + "}}",
          ip + "/" + std::to_string(len)};
}
Expr concat(const std::vector<Expr>& parts) {
  Expr out{"{\"concat\":[", ""};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) {
      out.json += ",";
      out.text += " . ";
    }
    out.json += parts[i].json;
    out.text += parts[i].text;
  }
  out.json += "]}";
  return out;
}
Expr numgenRandom(uint32_t mod, uint32_t offset) {
  return {"{\"numgen\":{\"mode\":\"random\",\"mod\":" + std::to_string(mod) + ",\"offset\":" + u32Json(offset) + "}}",
          "numgen random mod " + std::to_string(mod) + " offset " + std::to_string(offset)};
}
Expr integerConstant(uint32_t v) {
  const std::string n = std::to_string(v);
  const Expr masked{"{\"&\":[{\"meta\":{\"key\":\"length\"}}," + n + "]}", "meta length & " + n};
  if (v == 0) return masked;
  return {"{\"|\":[" + masked.json + "," + n + "]}", masked.text + " | " + n};
}
Expr numgenInc(uint32_t mod) {
  return {"{\"numgen\":{\"mode\":\"inc\",\"mod\":" + std::to_string(mod) + ",\"offset\":0}}",
          "numgen inc mod " + std::to_string(mod)};
}
Expr jhash(const Expr& input, uint32_t mod, uint32_t seed) {
  // As nft 1.0.6 lists it: no offset member when it is 0, the seed in decimal.
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", seed);
  return {"{\"jhash\":{\"mod\":" + std::to_string(mod) + ",\"seed\":" + std::to_string(seed) + ",\"expr\":" +
              input.json + "}}",
          "jhash " + input.text + " mod " + std::to_string(mod) + " seed " + hex};
}
Expr bitAnd(const Expr& e, uint32_t m) { return binop("&", "&", e, m); }
Expr bitOr(const Expr& e, uint32_t m) { return binop("|", "|", e, m); }
Expr bitXor(const Expr& e, uint32_t m) { return binop("^", "^", e, m); }
Expr fib(const char* flag, const char* result) {
  // nft 1.0.6 lists the flags as an array even when there is one.
  return {std::string("{\"fib\":{\"result\":\"") + result + "\",\"flags\":[\"" + flag + "\"]}}",
          std::string("fib ") + flag + " " + result};
}
Expr interfaceName(const std::string& name) { return {jsonString(name), nftQuoted(name)}; }
}  // namespace ex

namespace st {
Stmt match(const Expr& left, const char* op, const Expr& right) {
  // "in" is nft's implicit bit test (ct state new); equality is spelled out.
  std::string text = left.text + " ";
  if (std::string(op) != "in") text += std::string(op) + " ";
  return {std::string("{\"match\":{\"op\":\"") + op + "\",\"left\":" + left.json + ",\"right\":" +
              right.json + "}}",
          text + right.text, {}, {}};
}
Stmt matchSet(const Expr& left, const std::string& setName, bool negate) {
  Stmt s = match(left, negate ? "!=" : "==", {jsonString("@" + setName), "@" + setName});
  s.text = left.text + (negate ? " != @" : " @") + setName;
  s.setRefs.push_back(setName);
  return s;
}
Stmt vmap(const Expr& key, const std::string& mapName) {
  return {"{\"vmap\":{\"key\":" + key.json + ",\"data\":" + jsonString("@" + mapName) + "}}",
          key.text + " vmap @" + mapName, {}, {mapName}};
}
Stmt jump(const std::string& chain) {
  return {"{\"jump\":{\"target\":" + jsonString(chain) + "}}", "jump " + chain, {chain}, {}};
}
Stmt goTo(const std::string& chain) {
  return {"{\"goto\":{\"target\":" + jsonString(chain) + "}}", "goto " + chain, {chain}, {}};
}
Stmt drop() { return {"{\"drop\":null}", "drop", {}, {}}; }
Stmt ret() { return {"{\"return\":null}", "return", {}, {}}; }
Stmt namedCounter(const std::string& name) {
  return {"{\"counter\":" + jsonString(name) + "}", "counter name " + jsonString(name), {}, {}};
}
Stmt reject(Family f) {
  // The explicit form is what nft lists back for a bare `reject`.
  return {std::string("{\"reject\":{\"type\":\"") + (f == Family::IPv4 ? "icmp" : "icmpv6") +
              "\",\"expr\":\"port-unreachable\"}}",
          "reject", {}, {}};
}
Stmt dnatMap(Family f, const Expr& key, const std::string& mapName) {
  return {std::string("{\"dnat\":{\"family\":\"") + familyName(f) + "\",\"addr\":{\"map\":{\"key\":" +
              key.json + ",\"data\":" + jsonString("@" + mapName) + "}}}}",
          std::string("dnat ") + familyName(f) + " to " + key.text + " map @" + mapName, {}, {mapName}};
}
// No "family" in the JSON: nft 1.0.6 lists a literal dnat in an ip or ip6 table without one (it
// names the family only for the map forms), and a rule must read back as it was sent or a restart's
// reconcile rewrites it.
Stmt dnatTo(Family f, const std::string& ip, int32_t port) {
  const std::string addr = f == Family::IPv6 ? "[" + ip + "]" : ip;
  return {"{\"dnat\":{\"addr\":" + jsonString(ip) + ",\"port\":" + std::to_string(port) + "}}",
          std::string("dnat ") + familyName(f) + " to " + addr + ":" + std::to_string(port), {}, {}};
}
Stmt dnatRandomOf(Family f, const std::vector<std::pair<std::string, int32_t>>& endpoints) {
  const Expr key = ex::numgenRandom(static_cast<uint32_t>(endpoints.size()), 0);
  std::string json = std::string("{\"dnat\":{\"family\":\"") + familyName(f) + "\",\"addr\":{\"map\":{\"key\":" +
                     key.json + ",\"data\":{\"set\":[";
  std::string text = std::string("dnat ") + familyName(f) + " to " + key.text + " map { ";
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const Expr value = ex::concat({ex::addr(endpoints[i].first), ex::number(endpoints[i].second)});
    json += (i ? ",[" : "[") + std::to_string(i) + "," + value.json + "]";
    text += (i ? ", " : "") + std::to_string(i) + " : " + value.text;
  }
  return {json + "]}}}}}", text + " }", {}, {}};
}
Stmt setUpdate(const Expr& key, uint32_t timeoutSeconds, const std::string& setName) {
  const std::string t = std::to_string(timeoutSeconds);
  return {"{\"set\":{\"op\":\"update\",\"elem\":{\"elem\":{\"val\":" + key.json + ",\"timeout\":" + t +
              "}},\"set\":" + jsonString("@" + setName) + "}}",
          "update @" + setName + " { " + key.text + " timeout " + t + "s }", {}, {setName}};
}
Stmt numgenGoto(const std::vector<std::string>& targets) {
  const Expr key = ex::numgenRandom(static_cast<uint32_t>(targets.size()), 0);
  std::string json = "{\"vmap\":{\"key\":" + key.json + ",\"data\":{\"set\":[";
  std::string text = key.text + " vmap { ";
  for (size_t i = 0; i < targets.size(); ++i) {
    json += (i ? ",[" : "[") + std::to_string(i) + "," + gotoVerdict(targets[i]).json + "]";
    text += (i ? ", " : "") + std::to_string(i) + " : goto " + targets[i];
  }
  return {json + "]}}}", text + " }", targets, {}};
}
Stmt masqueradeFullyRandom() {
  return {"{\"masquerade\":{\"flags\":\"fully-random\"}}", "masquerade fully-random", {}, {}};
}
Stmt setFromMap(const Expr& field, const Expr& key, const std::string& mapName) {
  return {"{\"mangle\":{\"key\":" + field.json + ",\"value\":{\"map\":{\"key\":" + key.json +
              ",\"data\":" + jsonString("@" + mapName) + "}}}}",
          field.text + " set " + key.text + " map @" + mapName, {}, {mapName}};
}
Stmt markSet(const Expr& value) {
  return {"{\"mangle\":{\"key\":" + ex::meta("mark").json + ",\"value\":" + value.json + "}}",
          "meta mark set " + value.text, {}, {}};
}
}  // namespace st

Expr gotoVerdict(const std::string& chain) {
  return {"{\"goto\":{\"target\":" + jsonString(chain) + "}}", "goto " + chain};
}
Expr dropVerdict() { return {"{\"drop\":null}", "drop"}; }
Expr returnVerdict() { return {"{\"return\":null}", "return"}; }
Expr continueVerdict() { return {"{\"continue\":null}", "continue"}; }

}  // namespace kpn::nft

namespace kpn::nft {

namespace {

// A strict reader of the few JSON shapes our builders write (no whitespace, fixed key order).
// Every function returns false when the input is not one of them; the caller then falls back.
class TextReader {
 public:
  explicit TextReader(std::string_view s) : s_(s) {}

  bool expr(std::string& out) {
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '"') return string(out);
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    if (c != '{') return false;
    if (lit("{\"concat\":[")) {
      for (bool first = true;; first = false) {
        if (!first) {
          if (lit("]}")) return true;
          if (!lit(",")) return false;
          out += " . ";
        } else if (lit("]}")) {
          return true;
        }
        if (!expr(out)) return false;
      }
    }
    if (lit("{\"prefix\":{\"addr\":")) {
      if (!string(out)) return false;
      out += '/';
      return lit(",\"len\":") && number(out) && lit("}}");
    }
    for (const char* v : {"goto", "jump"}) {
      if (lit(std::string("{\"") + v + "\":{\"target\":")) {
        out += v;
        out += ' ';
        return string(out) && lit("}}");
      }
    }
    for (const char* v : {"drop", "accept", "return", "continue"}) {
      if (lit(std::string("{\"") + v + "\":null}")) {
        out += v;
        return true;
      }
    }
    return false;
  }
  bool atEnd() const { return pos_ == s_.size(); }
  bool lit(std::string_view l) {
    if (s_.substr(pos_, l.size()) != l) return false;
    pos_ += l.size();
    return true;
  }

  // A JSON string literal, unescaped (the escapes appendJsonString writes).
  bool string(std::string& out) {
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    for (++pos_; pos_ < s_.size(); ++pos_) {
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (++pos_ >= s_.size()) return false;
      switch (s_[pos_]) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'u': {
          if (pos_ + 4 >= s_.size()) return false;
          unsigned v = 0;
          for (int i = 1; i <= 4; ++i) {
            char h = s_[pos_ + i];
            v <<= 4;
            if (h >= '0' && h <= '9') v |= h - '0';
            else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
            else return false;
          }
          if (v >= 0x20) return false;  // appendJsonString escapes control characters only
          out.push_back(static_cast<char>(v));
          pos_ += 4;
          break;
        }
        default: return false;
      }
    }
    return false;
  }

 private:
  bool number(std::string& out) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    size_t digits = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ == digits) return false;
    out.append(s_.substr(start, pos_ - start));
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::string exprText(std::string_view json) {
  std::string out;
  TextReader r(json);
  if (r.expr(out) && r.atEnd()) return out;
  return std::string(json);
}

std::string verdictTarget(std::string_view json) {
  for (std::string_view head : {std::string_view("{\"goto\":{\"target\":"), std::string_view("{\"jump\":{\"target\":")}) {
    if (json.substr(0, head.size()) != head) continue;
    TextReader r(json.substr(head.size()));
    std::string target;
    if (r.string(target) && r.lit("}}") && r.atEnd()) return target;
  }
  return "";
}

}  // namespace kpn::nft
