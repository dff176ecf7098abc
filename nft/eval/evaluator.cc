#include "nft/eval/evaluator.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "nft/eval/eval_value.h"
#include "nft/expr.h"
#include "nft/json_read.h"
#include "nft/rule_text.h"
#include "nft/json_u32.h"

namespace kpn::nft::eval {

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::Accept: return "accept";
    case Verdict::Dnat: return "dnat";
    case Verdict::Drop: return "drop";
    case Verdict::Reject: return "reject";
    case Verdict::Mixed: return "mixed";
    case Verdict::Unsupported: return "unsupported";
  }
  return "?";
}

const char* selectionName(Selection s) {
  switch (s) {
    case Selection::None: return "";
    case Selection::Random: return "random";
    case Selection::RoundRobin: return "round-robin";
    case Selection::Hash: return "hash";
  }
  return "?";
}

namespace {

using JValue = rapidjson::Value;

constexpr size_t kMaxBranches = 4096;
constexpr size_t kMaxRulesPerRun = 100000;
constexpr size_t kJumpStack = 16;  // the kernel's NFT_JUMP_STACK_SIZE

// A lookup that found nothing, or a protocol field of another protocol: the kernel's NFT_BREAK —
// the rule ends without effect and the chain goes on with its next rule.
struct Break {
  std::string note;  // worth reporting (a map miss); empty for an ordinary non-match
};

std::string compact(const JValue& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

const char* keyOf(const JValue& obj) {
  return obj.IsObject() && obj.MemberCount() > 0 ? obj.MemberBegin()->name.GetString() : "";
}

std::string str(const JValue& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

uint64_t uintMember(const JValue& obj, const char* key, uint64_t dflt) {
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsUint64() ? it->value.GetUint64() : dflt;
}

bool isSetRef(const JValue& v) { return v.IsString() && v.GetStringLength() > 1 && v.GetString()[0] == '@'; }

uint64_t l4protoOf(const std::string& p) {
  if (p == "tcp") return 6;
  if (p == "udp") return 17;
  if (p == "sctp") return 132;
  throw Unsupported("packet protocol \"" + p + "\" (tcp, udp or sctp)");
}

bool inCidr(const Atom& a, const std::string& cidr) {
  auto slash = cidr.find('/');
  if (slash == std::string::npos) return false;
  rapidjson::Document d;
  std::string json = "{\"prefix\":{\"addr\":\"" + cidr.substr(0, slash) + "\",\"len\":" + cidr.substr(slash + 1) + "}}";
  const bool read = readJson(json, d);
  try {
    return read && atomMatches(a, d);
  } catch (const Unsupported&) {
    return false;
  }
}

int cidrLen(const std::string& cidr) {
  auto slash = cidr.find('/');
  return slash == std::string::npos ? -1 : std::atoi(cidr.c_str() + slash + 1);
}

// The choices of one run through the tables: every numgen/jhash draws the next value of a script;
// runs are repeated with the script advanced like an odometer until every combination was seen.
struct Chooser {
  std::vector<uint32_t> script, sizes;
  size_t pos = 0;
  double probability = 1.0;
  Selection selection = Selection::None;

  void restart() {
    pos = 0;
    probability = 1.0;
    selection = Selection::None;
  }
  uint32_t pick(uint64_t n, Selection how) {
    if (n == 0 || n > (1u << 20)) throw Unsupported("a numgen/hash modulus of " + std::to_string(n));
    if (n == 1) return 0;  // no choice at all: `numgen random mod 1 offset i` is the constant i
    if (pos == script.size()) {
      script.push_back(0);
      sizes.push_back(static_cast<uint32_t>(n));
    }
    probability /= static_cast<double>(n);
    if (how > selection) selection = how;
    return script[pos++];
  }
  bool advance() {
    script.resize(pos);
    sizes.resize(pos);
    while (!script.empty()) {
      if (script.back() + 1 < sizes.back()) {
        ++script.back();
        return true;
      }
      script.pop_back();
      sizes.pop_back();
    }
    return false;
  }
};

struct BaseChain {
  const EvalTable* table;
  const TableChain* chain;
};

// What a rule decided.
struct RuleResult {
  enum Kind { Next, Jump, Goto, Return, Accept, Drop, Reject } kind = Next;
  std::string target;
};

enum class Flow { Accept, Drop, Reject };

// What one evaluate() call parses once and every run reuses: rule and element JSON, and for each
// named set read with a given key type, its literal keys hashed (a 10k-service table has ~100k
// elements) and the positions of the others (prefixes, ranges) to scan.
struct SetIndex {
  std::unordered_map<std::string, rapidjson::SizeType> exact;  // first position of each key
  std::vector<rapidjson::SizeType> scan;
};
struct Caches {
  std::map<const void*, std::unique_ptr<rapidjson::Document>> json;
  std::map<std::pair<const void*, std::string>, SetIndex> indexes;
};

// One run of one packet through the tables, with a fixed script of choices.
class Run {
 public:
  Run(const std::vector<BaseChain>& bases, const Environment& env, Chooser& chooser,
      Caches& cache)
      : bases_(bases), env_(env), ch_(chooser), cache_(cache) {}

  Candidate go(const Packet& p) {
    pkt_ = p;
    l4proto_ = l4protoOf(p.protocol);
    Candidate c;
    Flow f = Flow::Accept;
    try {
      f = traverse();
    } catch (const Unsupported& u) {
      c.verdict = Verdict::Unsupported;
      c.notes = notes_;
      c.notes.insert(c.notes.end(), misses_.begin(), misses_.end());
      c.notes.push_back(std::string("unsupported: ") + u.what());
      c.path = std::move(path_);
      c.chains = std::move(chains_);
      return c;
    }
    c.verdict = f == Flow::Accept ? Verdict::Accept : f == Flow::Drop ? Verdict::Drop : Verdict::Reject;
    c.translated = dnat_;
    c.address = pkt_.daddr;
    c.port = pkt_.dport;
    c.masquerade = masquerade_;
    c.sourceSeen = pkt_.saddr;
    c.notes = std::move(notes_);
    // A map miss is worth a note when nothing translated the packet after it; a miss that a later
    // rule made good (the pick's first try at a slot, pick_chains.h) is part of the normal path.
    if (!dnat_) c.notes.insert(c.notes.end(), misses_.begin(), misses_.end());
    c.recorded = std::move(recorded_);
    c.setLookups = std::move(setLookups_);
    c.path = std::move(path_);
    c.chains = std::move(chains_);
    return c;
  }

 private:
  // Netfilter's order for the first packet of a connection.
  Flow traverse() {
    if (pkt_.entry == Entry::Prerouting) {
      oifname_.clear();
      if (!hook("prerouting")) return flow_;
      bool local = isLocal(pkt_.daddr);
      oifname_ = outputInterface();
      path_.push_back({"routing", "", "", local ? "local destination " + pkt_.daddr + ": input"
                                                : "forward to " + pkt_.daddr + " via " + oifname_, "", {}});
      if (local) return hook("input") ? Flow::Accept : flow_;
      if (!hook("forward")) return flow_;
      return hook("postrouting") ? Flow::Accept : flow_;
    }
    oifname_ = outputInterface();
    if (!hook("output")) return flow_;
    if (!hook("postrouting")) return flow_;
    if (isLocal(pkt_.daddr)) {
      // Looped back through lo: prerouting (its nat chains already had their turn) and input.
      path_.push_back({"routing", "", "", "local destination " + pkt_.daddr + ": looped back to input", "", {}});
      iifname_ = "lo";
      if (!hook("prerouting")) return flow_;
      return hook("input") ? Flow::Accept : flow_;
    }
    return Flow::Accept;
  }

  bool isLocal(const std::string& addr) const {
    Atom a = Atom::address(addr);
    if (inCidr(a, "127.0.0.0/8") || inCidr(a, "::1/128")) return true;
    for (const auto& l : env_.localAddresses) {
      try {
        Atom b = Atom::address(l);
        if (b.v6 == a.v6 && b.addr == a.addr) return true;
      } catch (const Unsupported&) {
      }
    }
    return false;
  }

  std::string outputInterface() const {
    if (isLocal(pkt_.daddr)) return "lo";
    Atom a = Atom::address(pkt_.daddr);
    const Route* best = nullptr;
    for (const auto& r : env_.routes)
      if (inCidr(a, r.cidr) && (!best || cidrLen(r.cidr) > cidrLen(best->cidr))) best = &r;
    return best ? best->ifname : env_.defaultInterface;
  }

  // Runs the base chains of one hook in priority order; false when the packet ended (flow_).
  bool hook(const std::string& name) {
    hook_ = name;
    bool dstManip = name == "prerouting" || name == "output";
    bool& natDone = dstManip ? dstNatDone_ : srcNatDone_;
    bool sawNat = false;
    for (const auto& b : bases_) {
      if (b.chain->hook->hook != name) continue;
      bool nat = b.chain->hook->type == "nat";
      if (nat && natDone) continue;  // the connection's translation of this kind is settled
      sawNat = sawNat || nat;
      Flow f = chain(b);
      if (nat && (dstManip ? dnat_ : masquerade_)) natDone = true;
      if (f != Flow::Accept) {
        flow_ = f;
        return false;
      }
    }
    if (sawNat) natDone = true;  // no translation: the kernel binds a null one
    return true;
  }

  const TableChain& chainNamed(const EvalTable& t, const std::string& name) {
    auto it = t.chains.find(name);
    if (it == t.chains.end()) throw Unsupported("a jump to chain " + name + ", which does not exist");
    return it->second;
  }

  Flow chain(const BaseChain& base) {
    struct Frame {
      const TableChain* chain;
      size_t next;
    };
    std::vector<Frame> stack{{base.chain, 0}};
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next >= f.chain->rules.size()) {
        stack.pop_back();  // the end of a chain returns
        continue;
      }
      const TableChain* in = f.chain;
      const TableRule& rule = in->rules[f.next++];
      if (++rulesRun_ > kMaxRulesPerRun) throw Unsupported("more than 100000 rules for one packet (a loop?)");
      RuleResult r = evalRule(*base.table, *in, rule);
      switch (r.kind) {
        case RuleResult::Next: break;
        case RuleResult::Jump:
          if (stack.size() >= kJumpStack) throw Unsupported("jumps nested deeper than 16 chains");
          stack.push_back({&chainNamed(*base.table, r.target), 0});
          break;
        case RuleResult::Goto: stack.back() = {&chainNamed(*base.table, r.target), 0}; break;
        case RuleResult::Return: stack.pop_back(); break;
        case RuleResult::Accept: return Flow::Accept;
        case RuleResult::Drop: return Flow::Drop;
        case RuleResult::Reject: return Flow::Reject;
      }
    }
    seenIn(base.chain->name);  // the base chain's policy
    return Flow::Accept;  // our model has no policy: accept, as ours are
  }

  const rapidjson::Document& parsed(const void* key, const std::string& json) {
    auto& slot = cache_.json[key];
    if (!slot) {
      slot = std::make_unique<rapidjson::Document>();
      if (!readJson(json, *slot)) throw Unsupported("unreadable JSON: " + json.substr(0, 80));
    }
    return *slot;
  }

  void seenIn(const std::string& chain) {
    if (chains_.empty() || chains_.back() != chain) chains_.push_back(chain);
  }

  const TableSet& setNamed(const EvalTable& t, const std::string& name) {
    auto it = t.sets.find(name);
    if (it == t.sets.end()) throw Unsupported("a lookup in @" + name + ", which does not exist");
    return it->second;
  }

  // Notes the element a named set or map lookup found, for the step of the rule.
  void recordLookup(const std::string& name, const TableSet& set, const Value& key, rapidjson::SizeType pos) {
    if (pos >= set.elements.size()) return;
    const auto& [keyJson, valueJson] = set.elements[pos];
    auto comment = set.comments.find(keyJson);
    auto left = set.expires.find(keyJson);
    lookups_.push_back({name, valueText(key), exprText(keyJson), valueJson.empty() ? "" : exprText(valueJson),
                        comment == set.comments.end() ? "" : comment->second,
                        left == set.expires.end() ? std::nullopt : std::optional<uint64_t>(left->second)});
  }

  // A set's elements as one parsed array of [key, value] pairs.
  const JValue& setElements(const EvalTable& t, const std::string& name) {
    auto it = t.sets.find(name);
    if (it == t.sets.end()) throw Unsupported("a lookup in @" + name + ", which does not exist");
    auto& slot = cache_.json[&it->second];
    if (!slot) {
      std::string json = "[";
      for (const auto& [k, v] : it->second.elements) {
        if (json.size() > 1) json += ",";
        json += "[" + k + "," + (v.empty() ? "null" : v) + "]";
      }
      json += "]";
      slot = std::make_unique<rapidjson::Document>();
      if (!readJson(json, *slot)) throw Unsupported("unreadable elements of @" + name);
    }
    return *slot;
  }

  // The element of a named or anonymous set/map that `v` falls into; null when none.
  const JValue* find(const EvalTable& t, const Value& v, const JValue& setExpr, const JValue** data) {
    const JValue* elems = nullptr;
    if (isSetRef(setExpr)) {
      std::string name = setExpr.GetString() + 1;
      setLookups_.push_back(chain_ + " @" + name);
      elems = &setElements(t, name);
      rapidjson::SizeType pos = 0;
      const JValue* hit = findIndexed(*elems, v, data, &pos);
      if (hit) recordLookup(name, setNamed(t, name), v, pos);
      return hit;
    } else if (setExpr.IsObject() && setExpr.HasMember("set")) {
      elems = &setExpr["set"];
      if (!elems->IsArray()) {  // a one-element anonymous set
        if (matchesPattern(v, *elems)) return elems;
        return nullptr;
      }
    } else {
      throw Unsupported("a set that is neither @name nor {\"set\":…}: " + compact(setExpr).substr(0, 80));
    }
    for (const auto& e : elems->GetArray()) {
      // Named: [key, value-or-null]. Anonymous: a key, or [key, value] for maps.
      bool pair = e.IsArray() && e.Size() == 2;
      const JValue& key = pair ? e[0] : e;
      if (matchesPattern(v, key)) {
        if (data) *data = pair && !e[1].IsNull() ? &e[1] : nullptr;
        return &key;
      }
    }
    return nullptr;
  }

  static const JValue& keyOfElement(const JValue& e) { return e.IsArray() && e.Size() == 2 ? e[0] : e; }

  // A named set's elements are [key, value-or-null] pairs (setElements).
  const JValue* findIndexed(const JValue& elems, const Value& v, const JValue** data, rapidjson::SizeType* pos) {
    std::string types;
    for (const auto& a : v) types += static_cast<char>('a' + static_cast<int>(a.type));
    auto [it, fresh] = cache_.indexes.try_emplace({&elems, types});
    SetIndex& index = it->second;
    if (fresh) {
      std::string key;
      for (rapidjson::SizeType i = 0; i < elems.Size(); ++i) {
        if (literalKey(v, keyOfElement(elems[i]), &key))
          index.exact.emplace(key, i);
        else
          index.scan.push_back(i);
      }
    }
    // The first element that matches, as a linear walk would find it.
    rapidjson::SizeType best = elems.Size();
    auto hit = index.exact.find(valueKey(v));
    if (hit != index.exact.end()) best = hit->second;
    for (auto i : index.scan) {
      if (i >= best) break;
      if (matchesPattern(v, keyOfElement(elems[i]))) best = i;
    }
    if (best == elems.Size()) return nullptr;
    *pos = best;
    const JValue& e = elems[best];
    if (data) *data = !e[1].IsNull() ? &e[1] : nullptr;
    return &e[0];
  }

  std::string ruleText(const TableRule& r) const {
    // nft's spelling for our model and a listing alike; our own text only where it cannot read it.
    std::string t = ruleTextFromJson(r.exprJson);
    if (t == r.exprJson && !r.text.empty()) t = r.text;
    if (!r.comment.empty()) t += " comment \"" + r.comment + "\"";
    return t;
  }

  RuleResult evalRule(const EvalTable& t, const TableChain& c, const TableRule& rule) {
    const auto& stmts = parsed(&rule, rule.exprJson);
    if (!stmts.IsArray()) throw Unsupported("a rule whose expr is not an array, in chain " + c.name);
    std::vector<std::string> actions;
    lookups_.clear();
    chain_ = c.name;
    auto done = [&](RuleResult r) {
      path_.push_back({hook_, c.name, ruleText(rule), actions.empty() ? "continue" : join(actions), rule.comment,
                       std::move(lookups_)});
      seenIn(c.name);
      return r;
    };
    try {
      for (const auto& s : stmts.GetArray()) {
        if (!s.IsObject() || s.MemberCount() == 0) throw Unsupported("a statement that is not an object");
        std::string k = keyOf(s);
        const JValue& body = s.MemberBegin()->value;
        if (k == "match") {
          if (!match(t, body)) return {};
        } else if (k == "counter" || k == "log") {
          // no effect on the packet
        } else if (k == "mangle") {
          if (body.HasMember("key") && body["key"].IsObject() && keyOf(body["key"]) == std::string("payload"))
            setPayload(t, body, actions);
          else
            setMark(t, body, actions);
        } else if (k == "jump" || k == "goto") {
          actions.push_back(k + " " + str(body, "target"));
          return done({k == "jump" ? RuleResult::Jump : RuleResult::Goto, str(body, "target")});
        } else if (k == "return" || k == "accept" || k == "drop" || k == "continue") {
          actions.push_back(k);
          return done(verdict(k, ""));
        } else if (k == "reject") {
          actions.push_back("reject");
          return done({RuleResult::Reject, ""});
        } else if (k == "vmap") {
          RuleResult r = vmap(t, body, actions);
          if (r.kind == RuleResult::Next && actions.empty()) return {};  // no element: no match
          return done(r);
        } else if (k == "dnat") {
          dnat(t, body, actions);
          return done({RuleResult::Accept, ""});
        } else if (k == "set") {
          updateSet(t, body, actions);
        } else if (k == "masquerade") {
          masquerade(actions);
          return done({RuleResult::Accept, ""});
        } else {
          throw Unsupported("statement \"" + k + "\"");
        }
      }
    } catch (const Break& b) {
      if (!b.note.empty()) {
        misses_.push_back(b.note + " (chain " + c.name + ": " + ruleText(rule) + ")");
        path_.push_back({hook_, c.name, ruleText(rule), "no match: " + b.note, rule.comment, std::move(lookups_)});
      }
      return {};
    } catch (const Unsupported& u) {
      throw Unsupported(std::string(u.what()) + " in chain " + c.name + ", rule: " + ruleText(rule));
    }
    return done({});
  }

  static std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
    return out;
  }

  static RuleResult verdict(const std::string& k, const std::string& target) {
    if (k == "jump") return {RuleResult::Jump, target};
    if (k == "goto") return {RuleResult::Goto, target};
    if (k == "return") return {RuleResult::Return, ""};
    if (k == "accept") return {RuleResult::Accept, ""};
    if (k == "drop") return {RuleResult::Drop, ""};
    if (k == "continue") return {RuleResult::Next, ""};
    throw Unsupported("verdict \"" + k + "\"");
  }

  bool match(const EvalTable& t, const JValue& m) {
    std::string op = str(m, "op");
    if (!m.HasMember("left") || !m.HasMember("right")) throw Unsupported("a match without left/right");
    Value left = expr(t, m["left"]);
    const JValue& right = m["right"];
    bool negate = op == "!=";
    if (isSetRef(right) || (right.IsObject() && right.HasMember("set"))) {
      if (op != "==" && op != "!=" && op != "in") throw Unsupported("set match with op " + op);
      bool found = find(t, left, right, nullptr) != nullptr || inDynamicEntries(right, left);
      return found != negate;
    }
    if (op == "in") {
      // nft's implicit bit test (ct state new, ct status dnat): any bit in common.
      if (left.size() != 1) throw Unsupported("a bit test on a concatenation");
      Atom r = readLiteral(right, left[0].type);
      if (left[0].type == AtomType::CtState || left[0].type == AtomType::CtStatus) return (left[0].num & r.num) != 0;
      return matchesPattern(left, right);
    }
    if (op == "==" || op == "!=") return matchesPattern(left, right) != negate;
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      if (left.size() != 1 || left[0].type == AtomType::Address || left[0].type == AtomType::IfName ||
          left[0].type == AtomType::Symbol)
        throw Unsupported("comparison " + op + " on " + valueText(left));
      uint64_t a = left[0].num, b = readLiteral(right, left[0].type).num;
      return op == "<" ? a < b : op == ">" ? a > b : op == "<=" ? a <= b : a >= b;
    }
    throw Unsupported("match op \"" + op + "\"");
  }

  Value expr(const EvalTable& t, const JValue& e) {
    if (e.IsString() || e.IsNumber()) return {readUntyped(e)};
    std::string k = keyOf(e);
    if (k.empty()) throw Unsupported("an expression of an unknown shape: " + compact(e).substr(0, 80));
    const JValue& b = e.MemberBegin()->value;
    if (k == "payload") return {payload(b)};
    if (k == "meta") return {meta(str(b, "key"))};
    if (k == "ct") {
      if (b.HasMember("dir")) throw Unsupported("ct with a direction (ct original …)");
      std::string key = str(b, "key");
      if (key == "state") return {Atom::integer(ctState_, AtomType::CtState)};
      if (key == "status") return {Atom::integer(ctStatus_, AtomType::CtStatus)};
      throw Unsupported("ct " + key);
    }
    if (k == "fib") return {fib(b)};
    if (k == "numgen") {
      std::string mode = str(b, "mode");
      if (mode != "random" && mode != "inc") throw Unsupported("numgen " + mode);
      auto o = b.FindMember("offset");
      uint64_t offset = o == b.MemberEnd() ? 0 : u32Listed(o->value).value_or(0);
      return {Atom::integer(offset + ch_.pick(uintMember(b, "mod", 0), mode == "random" ? Selection::Random : Selection::RoundRobin))};
    }
    if (k == "jhash" || k == "symhash") {
      if (b.HasMember("expr")) expr(t, b["expr"]);  // its input must be one we understand
      uint64_t offset = uintMember(b, "offset", 0);
      return {Atom::integer(offset + ch_.pick(uintMember(b, "mod", 0), Selection::Hash))};
    }
    if (k == "concat") {
      if (!b.IsArray()) throw Unsupported("concat that is not an array");
      Value out;
      for (const auto& p : b.GetArray()) {
        Value part = expr(t, p);
        out.insert(out.end(), part.begin(), part.end());
      }
      return out;
    }
    if (k == "&" || k == "|" || k == "^" || k == "<<" || k == ">>") {
      if (!b.IsArray() || b.Size() != 2) throw Unsupported("binary operation " + k + " without two operands");
      Value l = expr(t, b[0]), r = expr(t, b[1]);
      if (l.size() != 1 || r.size() != 1 || l[0].type == AtomType::Address || r[0].type == AtomType::Address)
        throw Unsupported("binary operation " + k + " on " + valueText(l));
      uint64_t x = l[0].num, y = r[0].num;
      uint64_t v = k == "&" ? x & y : k == "|" ? x | y : k == "^" ? x ^ y : k == "<<" ? x << y : x >> y;
      return {Atom::integer(v, l[0].type)};
    }
    if (k == "map") {
      if (!b.HasMember("key") || !b.HasMember("data")) throw Unsupported("map without key/data");
      Value key = expr(t, b["key"]);
      const JValue* data = nullptr;
      if (!find(t, key, b["data"], &data) || !data) {
        std::string where = isSetRef(b["data"]) ? std::string(b["data"].GetString()) : "an anonymous map";
        throw Break{"no element " + valueText(key) + " in " + where};
      }
      return readUntypedValue(*data);
    }
    throw Unsupported("expression \"" + k + "\"");
  }

  Atom payload(const JValue& b) {
    std::string proto = str(b, "protocol"), field = str(b, "field");
    if (proto == "ip" || proto == "ip6") {
      bool v6 = proto == "ip6";
      if (v6 != (pkt_.family == Family::IPv6)) throw Break{};  // another network protocol
      if (field == "saddr") return Atom::address(pkt_.saddr);
      if (field == "daddr") return Atom::address(pkt_.daddr);
      if (field == (v6 ? "nexthdr" : "protocol")) return Atom::integer(l4proto_, AtomType::L4Proto);
    } else if (proto == "th" || proto == "tcp" || proto == "udp" || proto == "sctp") {
      // tcp dport carries an implicit "meta l4proto tcp": on another protocol the rule ends.
      if (proto != "th" && l4protoOf(proto) != l4proto_) throw Break{};
      if (field == "sport") return Atom::integer(pkt_.sport);
      if (field == "dport") return Atom::integer(pkt_.dport);
    }
    throw Unsupported("payload " + proto + " " + field);
  }

  Atom meta(const std::string& key) {
    if (key == "l4proto") return Atom::integer(l4proto_, AtomType::L4Proto);
    if (key == "mark") return Atom::integer(mark_);
    if (key == "length") return Atom::integer(pkt_.length);
    if (key == "nfproto") return Atom::symbol(pkt_.family == Family::IPv4 ? "ipv4" : "ipv6");
    std::string in = iifname_.empty() ? pkt_.iifname : iifname_;
    if (key == "iifname") return Atom::symbol(in, AtomType::IfName);  // "" without one, as the kernel
    if (key == "oifname") return Atom::symbol(oifname_, AtomType::IfName);
    // iif/oif are listed by name; without the device the kernel ends the rule.
    if (key == "iif") {
      if (in.empty()) throw Break{};
      return Atom::symbol(in, AtomType::IfName);
    }
    if (key == "oif") {
      if (oifname_.empty()) throw Break{};
      return Atom::symbol(oifname_, AtomType::IfName);
    }
    throw Unsupported("meta " + key);
  }

  Atom fib(const JValue& b) {
    if (str(b, "result") != "type") throw Unsupported("fib … " + str(b, "result") + " (only type)");
    bool saddr = false, daddr = false;
    if (b.HasMember("flags")) {
      const JValue& f = b["flags"];
      auto take = [&](const JValue& v) {
        if (!v.IsString()) return;
        std::string s = v.GetString();
        if (s == "saddr") saddr = true;
        if (s == "daddr") daddr = true;
      };
      if (f.IsArray())
        for (const auto& v : f.GetArray()) take(v);
      else
        take(f);
    }
    if (saddr == daddr) throw Unsupported("fib without exactly one of saddr/daddr");
    return Atom::symbol(isLocal(saddr ? pkt_.saddr : pkt_.daddr) ? "local" : "unicast");
  }

  // ip daddr set …, tcp dport set …: the header rewritten in place, no NAT binding (conntrack
  // keeps the tuple as the packet came; a later dnat binds from there).
  void setPayload(const EvalTable& t, const JValue& b, std::vector<std::string>& actions) {
    const JValue& field = b["key"]["payload"];
    std::string proto = str(field, "protocol"), name = str(field, "field");
    if (!b.HasMember("value")) throw Unsupported("mangle without a value");
    Value v;
    try {
      v = expr(t, b["value"]);
    } catch (const Break&) {
      throw Break{};  // a key not in the rewrite's map: the common case, not worth a note
    }
    if (v.size() != 1) throw Unsupported("set " + proto + " " + name + " to " + valueText(v));
    if ((proto == "ip" || proto == "ip6") && name == "daddr") {
      if ((proto == "ip6") != (pkt_.family == Family::IPv6)) throw Break{};
      if (v[0].type != AtomType::Address) throw Unsupported("daddr set to " + valueText(v));
      pkt_.daddr = v[0].text();
    } else if ((proto == "tcp" || proto == "udp" || proto == "sctp") && name == "dport") {
      if (l4protoOf(proto) != l4proto_) throw Break{};
      if (v[0].type == AtomType::Address) throw Unsupported("dport set to " + valueText(v));
      pkt_.dport = static_cast<uint16_t>(v[0].num);
    } else {
      throw Unsupported("mangle of " + proto + " " + name);
    }
    actions.push_back(proto + " " + name + " set " + valueText(v));
  }

  void setMark(const EvalTable& t, const JValue& b, std::vector<std::string>& actions) {
    if (!b.HasMember("key") || !b["key"].IsObject() || keyOf(b["key"]) != std::string("meta") ||
        str(b["key"]["meta"], "key") != "mark" || !b.HasMember("value"))
      throw Unsupported("mangle of anything but meta mark");
    Value v = expr(t, b["value"]);
    if (v.size() != 1 || v[0].type == AtomType::Address) throw Unsupported("a mark that is not a number");
    mark_ = static_cast<uint32_t>(v[0].num);
    char buf[32];
    std::snprintf(buf, sizeof buf, "mark 0x%08x", mark_);
    actions.push_back(buf);
  }

  RuleResult vmap(const EvalTable& t, const JValue& b, std::vector<std::string>& actions) {
    if (!b.HasMember("key") || !b.HasMember("data")) throw Unsupported("vmap without key/data");
    Value key = expr(t, b["key"]);
    const JValue* data = nullptr;
    if (!find(t, key, b["data"], &data) || !data) return {};
    std::string k = keyOf(*data);
    std::string target = data->IsObject() && (*data)[k.c_str()].IsObject() ? str((*data)[k.c_str()], "target") : "";
    actions.push_back("vmap " + valueText(key) + " → " + k + (target.empty() ? "" : " " + target));
    return verdict(k, target);
  }

  void dnat(const EvalTable& t, const JValue& b, std::vector<std::string>& actions) {
    if (!b.HasMember("addr")) throw Unsupported("dnat without an address");
    if (b.HasMember("family") && str(b, "family") != familyName(pkt_.family)) throw Unsupported("dnat of another family");
    Value to = expr(t, b["addr"]);
    if (to.empty() || to[0].type != AtomType::Address) throw Unsupported("dnat to " + valueText(to));
    std::string addr = to[0].text();
    uint16_t port = pkt_.dport;
    if (to.size() == 2 && to[1].type != AtomType::Address) {
      port = static_cast<uint16_t>(to[1].num);
    } else if (to.size() != 1) {
      throw Unsupported("dnat to " + valueText(to));
    }
    if (b.HasMember("port")) {
      Value p = expr(t, b["port"]);
      if (p.size() != 1 || p[0].type == AtomType::Address) throw Unsupported("dnat port " + valueText(p));
      port = static_cast<uint16_t>(p[0].num);
    }
    pkt_.daddr = addr;
    pkt_.dport = port;
    dnat_ = true;
    ctStatus_ |= ctStatusBit("dnat");
    oifname_ = outputInterface();  // rerouted to the new destination
    actions.push_back("dnat to " + (pkt_.family == Family::IPv6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port));
  }

  // A lookup in a named set also sees what earlier connections put there (session affinity).
  // Recorded as a lookup like a listed element (its time left unknown: time is not modelled).
  bool inDynamicEntries(const JValue& setExpr, const Value& v) {
    if (!isSetRef(setExpr) || env_.dynamicEntries.empty()) return false;
    const std::string name = setExpr.GetString() + 1, key = valueKey(v);
    for (const SetEntry& e : env_.dynamicEntries)
      if (e.set == name && e.key == key) {
        lookups_.push_back({name, valueText(v), e.text, "", "", std::nullopt});
        return true;
      }
    return false;
  }

  // update/add @set { key [timeout Ns] }: recorded on the candidate; the packet goes on.
  void updateSet(const EvalTable& t, const JValue& b, std::vector<std::string>& actions) {
    std::string op = str(b, "op");
    if (op != "update" && op != "add") throw Unsupported("set statement " + op);
    if (!b.HasMember("set") || !isSetRef(b["set"]) || !b.HasMember("elem")) throw Unsupported("set statement without @set/elem");
    const std::string name = b["set"].GetString() + 1;
    if (!t.sets.count(name)) throw Unsupported("an update of @" + name + ", which does not exist");
    const JValue* elem = &b["elem"];
    uint64_t timeout = 0;
    if (elem->IsObject() && elem->HasMember("elem")) {
      const JValue& wrapped = (*elem)["elem"];
      if (!wrapped.HasMember("val")) throw Unsupported("a set element without val");
      timeout = uintMember(wrapped, "timeout", 0);
      elem = &wrapped["val"];
    }
    Value key = expr(t, *elem);
    SetEntry e{name, valueKey(key), valueText(key), timeout};
    actions.push_back(op + " @" + name + " { " + e.text + (timeout ? " timeout " + std::to_string(timeout) + "s" : "") + " }");
    recorded_.push_back(std::move(e));
  }

  void masquerade(std::vector<std::string>& actions) {
    if (hook_ != "postrouting") throw Unsupported("masquerade outside postrouting");
    const std::string& src = env_.masqueradeSource[pkt_.family == Family::IPv4 ? 0 : 1];
    if (src.empty()) throw Unsupported("masquerade, but the environment has no masquerade source for this family");
    pkt_.saddr = src;
    masquerade_ = true;
    ctStatus_ |= ctStatusBit("snat");
    actions.push_back("masquerade to " + src);
  }

  const std::vector<BaseChain>& bases_;
  const Environment& env_;
  Chooser& ch_;
  Caches& cache_;

  Packet pkt_;
  uint64_t l4proto_ = 0;
  uint32_t mark_ = 0;
  uint64_t ctState_ = 8;  // new: the first packet of a connection
  uint64_t ctStatus_ = 0;
  bool dnat_ = false, masquerade_ = false, dstNatDone_ = false, srcNatDone_ = false;
  std::string hook_, oifname_, iifname_;
  Flow flow_ = Flow::Accept;
  size_t rulesRun_ = 0;
  std::vector<Step> path_;
  std::vector<std::string> notes_;
  std::vector<std::string> misses_;  // map misses: notes only if the packet ends untranslated
  std::vector<Lookup> lookups_;  // of the rule being evaluated
  std::string chain_;            // of the rule being evaluated
  std::vector<std::string> setLookups_;
  std::vector<std::string> chains_;
  std::vector<SetEntry> recorded_;
};

bool sameOutcome(const Candidate& a, const Candidate& b) {
  return std::tie(a.verdict, a.translated, a.address, a.port, a.masquerade, a.sourceSeen, a.notes, a.recorded) ==
         std::tie(b.verdict, b.translated, b.address, b.port, b.masquerade, b.sourceSeen, b.notes, b.recorded);
}

std::string summary(const Trace& t) {
  if (t.verdict == Verdict::Unsupported) {
    for (const auto& c : t.candidates)
      for (const auto& n : c.notes)
        if (n.rfind("unsupported: ", 0) == 0) return n;
  }
  if (t.verdict == Verdict::Dnat) {
    size_t n = 0;
    for (const auto& c : t.candidates) n += c.translated && c.verdict == Verdict::Accept;
    return "DNAT to " + std::to_string(n) + " candidate(s)";
  }
  if (t.verdict == Verdict::Mixed) return "the outcome depends on a numgen/hash choice";
  const Candidate& c = t.candidates.front();
  const Step* last = nullptr;
  for (const auto& s : c.path)
    if (!s.chain.empty()) last = &s;
  if (t.verdict == Verdict::Accept)
    return "accepted untouched (" + (last ? "last rule: " + last->chain + ": " + last->action : std::string("no rule matched")) + ")";
  return std::string(verdictName(t.verdict)) + (last ? " in chain " + last->chain + ": " + last->rule : "");
}

}  // namespace

namespace {
Trace traceWith(const std::vector<EvalTable>& tables, Caches& cache, const Packet& packet, const Environment& env);
}  // namespace

struct Evaluator::Parsed {
  Caches cache;
};

Evaluator::Evaluator(std::vector<EvalTable> tables) : tables_(std::move(tables)), parsed_(std::make_unique<Parsed>()) {}
Evaluator::~Evaluator() = default;

Trace Evaluator::trace(const Packet& packet, const Environment& env) { return traceWith(tables_, parsed_->cache, packet, env); }

Trace evaluate(const std::vector<EvalTable>& tables, const Packet& packet, const Environment& env) {
  Caches cache;
  return traceWith(tables, cache, packet, env);
}

namespace {

Trace traceWith(const std::vector<EvalTable>& tables, Caches& cache, const Packet& packet, const Environment& env) {
  Trace trace;
  trace.family = packet.family;
  trace.packet = packet;
  std::vector<BaseChain> bases;
  for (const auto& t : tables) {
    if (t.family != packet.family) continue;
    for (const auto& [name, c] : t.chains)
      if (c.hook) bases.push_back({&t, &c});
  }
  std::stable_sort(bases.begin(), bases.end(), [](const BaseChain& a, const BaseChain& b) {
    return a.chain->hook->priority < b.chain->hook->priority;
  });

  Chooser chooser;
  size_t runs = 0;
  do {
    chooser.restart();
    Candidate c;
    try {
      c = Run(bases, env, chooser, cache).go(packet);
    } catch (const Unsupported& u) {  // the packet itself (its addresses, protocol)
      c.verdict = Verdict::Unsupported;
      c.notes.push_back(std::string("unsupported: ") + u.what());
    }
    c.probability = chooser.probability;
    c.selection = chooser.selection;
    auto same = std::find_if(trace.candidates.begin(), trace.candidates.end(),
                             [&](const Candidate& o) { return sameOutcome(o, c); });
    if (same != trace.candidates.end()) {
      same->probability += c.probability;
      if (c.selection > same->selection) same->selection = c.selection;
    } else {
      trace.candidates.push_back(std::move(c));
    }
    if (++runs > kMaxBranches) {
      Candidate over;
      over.verdict = Verdict::Unsupported;
      over.notes.push_back("unsupported: more than 4096 numgen/hash combinations for one packet");
      trace.candidates.push_back(std::move(over));
      break;
    }
  } while (chooser.advance());

  std::stable_sort(trace.candidates.begin(), trace.candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(b.probability, a.address, a.port) < std::tie(a.probability, b.address, b.port);
  });
  bool unsupported = false, translated = false, uniform = true;
  for (const auto& c : trace.candidates) {
    unsupported = unsupported || c.verdict == Verdict::Unsupported;
    translated = translated || c.translated;
    uniform = uniform && c.verdict == trace.candidates.front().verdict;
  }
  trace.verdict = unsupported ? Verdict::Unsupported
                  : translated ? Verdict::Dnat
                  : uniform    ? trace.candidates.front().verdict
                               : Verdict::Mixed;
  trace.reason = summary(trace);
  return trace;
}

}  // namespace

Trace evaluate(const Ruleset& rs, const Packet& packet, const Environment& env) {
  std::vector<EvalTable> tables;
  for (const auto& t : rs.tables)
    if (t.family == packet.family) tables.push_back(tableFromModel(t));
  return evaluate(tables, packet, env);
}

std::string traceText(const Trace& t) {
  const Packet& p = t.packet;
  auto hostPort = [&](const std::string& a, uint16_t port) {
    return (t.family == Family::IPv6 ? "[" + a + "]" : a) + ":" + std::to_string(port);
  };
  std::string out = std::string(familyName(t.family)) + " " + p.protocol + " " + hostPort(p.saddr, p.sport) + " → " +
                    hostPort(p.daddr, p.dport) + (p.entry == Entry::Output ? ", sent by the node" : ", in on " +
                    (p.iifname.empty() ? std::string("(no interface)") : p.iifname)) + "\n";
  out += std::string(verdictName(t.verdict)) + ": " + t.reason + "\n";
  for (size_t i = 0; i < t.candidates.size(); ++i) {
    const Candidate& c = t.candidates[i];
    char prob[32];
    std::snprintf(prob, sizeof prob, "%.4g%%", c.probability * 100);
    out += "  [" + std::to_string(i + 1) + "] " + prob;
    if (c.selection != Selection::None) out += std::string(" (") + selectionName(c.selection) + ")";
    out += std::string(" ") + verdictName(c.verdict);
    if (c.verdict == Verdict::Accept) {
      out += (c.translated ? " → " : " untouched to ") + hostPort(c.address, c.port) + ", source seen " +
             c.sourceSeen + (c.masquerade ? " (masqueraded)" : "");
    }
    out += "\n";
    for (const auto& n : c.notes) out += "      note: " + n + "\n";
    for (const auto& e : c.recorded) out += "      remembers: @" + e.set + " { " + e.text + " }\n";
    for (const auto& s : c.path) {
      if (s.chain.empty()) {
        out += "      " + s.hook + ": " + s.action + "\n";
      } else {
        out += "      " + s.hook + " " + s.chain + ": " + s.rule + "\n          → " + s.action + "\n";
      }
    }
  }
  return out;
}

}  // namespace kpn::nft::eval
