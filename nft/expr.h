// Builders for the expressions and statements our rules use, each written in both of nft's
// spellings at once: libnftables JSON, exactly as nft 1.0.6 lists it back (so a rule read from the
// kernel compares equal to the rule we rendered), and native text (for --dry-run and logs).
// Only this file knows nft syntax; everything above it composes builders.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpn::nft {

enum class Family { IPv4, IPv6 };
const char* familyName(Family f);       // "ip" / "ip6": table family and payload protocol
const char* addrTypeName(Family f);     // "ipv4_addr" / "ipv6_addr"

struct Expr {
  std::string json;
  std::string text;
};

// A statement also records what it references, so the fake can check jumps and lookups.
struct Stmt {
  std::string json;
  std::string text;
  std::vector<std::string> chainRefs;
  std::vector<std::string> setRefs;
};

namespace ex {
Expr payload(const char* protocol, const char* field);  // ip daddr, th dport
Expr meta(const char* key);                             // meta l4proto, meta mark
Expr ct(const char* key);                               // ct state, ct status
Expr symbol(const std::string& s);                      // tcp, new, dnat: a JSON string
Expr addr(const std::string& canonicalIp);              // an address in canonical text form
Expr number(int64_t n);
Expr prefix(const std::string& canonicalIp, int len);
Expr concat(const std::vector<Expr>& parts);
Expr numgenRandom(uint32_t mod, uint32_t offset);
// A 32-bit integer constant where nft 1.0.6 wants an expression (the left side of a lookup,
// inside a concatenation, takes no literal): `meta length & v | v`, which is v for every packet
// (`meta length & 0` for 0; both exactly as nft lists them back). In the kernel a meta load and
// an inline bitwise op; `numgen random mod 1 offset v`, the other way to spell it, is a call that
// draws a random number first (bench/datapath_bench.py).
Expr integerConstant(uint32_t v);
Expr numgenInc(uint32_t mod);                            // numgen inc mod N: exact rotation per rule
Expr jhash(const Expr& input, uint32_t mod, uint32_t seed);  // jhash <input> mod N seed S
Expr bitAnd(const Expr& e, uint32_t mask);
Expr bitOr(const Expr& e, uint32_t mask);
Expr bitXor(const Expr& e, uint32_t mask);
Expr fib(const char* flag, const char* result);  // fib saddr type: the route type of an address
Expr interfaceName(const std::string& name);     // "veth*": quoted in native text (a trailing * is a wildcard)
}  // namespace ex

namespace st {
// op is "==", "!=" or "in" (a bit test, what nft uses for ct state/status).
Stmt match(const Expr& left, const char* op, const Expr& right);
Stmt matchSet(const Expr& left, const std::string& setName, bool negate = false);  // left @set
Stmt vmap(const Expr& key, const std::string& mapName);                            // key vmap @map
Stmt jump(const std::string& chain);
Stmt goTo(const std::string& chain);
Stmt drop();
Stmt ret();
Stmt reject(Family f);  // ICMP(v6) port unreachable: connect() fails with ECONNREFUSED
// counter name "NAME": adds the packet to a named counter object of the table (Table::counters),
// which, unlike a rule's own counter, outlives the flush and re-add of its rule.
Stmt namedCounter(const std::string& name);
// dnat <family> to <key> map @map, where the map yields address . port
Stmt dnatMap(Family f, const Expr& key, const std::string& mapName);
// dnat <family> to address:port (IPv6: [address]:port)
Stmt dnatTo(Family f, const std::string& ip, int32_t port);
// dnat <family> to numgen random mod N map { 0 : address . port, ... }: one of N at random, from
// an anonymous map (for a handful of rules only: anonymous sets make nft's load grow quadratically).
Stmt dnatRandomOf(Family f, const std::vector<std::pair<std::string, int32_t>>& endpoints);
// update @set { key timeout Ns }: adds the key, or refreshes its timeout (session affinity).
Stmt setUpdate(const Expr& key, uint32_t timeoutSeconds, const std::string& setName);
// numgen random mod N vmap { 0 : goto targets[0], ... }: an anonymous verdict map.
Stmt numgenGoto(const std::vector<std::string>& targets);
Stmt masqueradeFullyRandom();
Stmt markSet(const Expr& value);
// <field> set <key> map @map: a header field rewritten in place (no NAT binding) to what the map
// holds for the key; a key missing from the map ends the rule, as any failed lookup.
Stmt setFromMap(const Expr& field, const Expr& key, const std::string& mapName);
}  // namespace st

// Verdict values for verdict-map elements.
Expr gotoVerdict(const std::string& chain);
Expr dropVerdict();
Expr returnVerdict();
Expr continueVerdict();  // a hit that goes on with the next rule (the key is known, the work is later)

// The native text of an element key or value from its JSON, exactly as the builders above write
// it, for the forms elements use: strings (addresses, symbols), numbers, concat, prefix, and the
// verdicts goto/jump/drop/accept/return/continue. Anything else comes back as the JSON itself.
std::string exprText(std::string_view json);
// The target of a {"goto":..} or {"jump":..} verdict; "" for anything else.
std::string verdictTarget(std::string_view json);

}  // namespace kpn::nft
