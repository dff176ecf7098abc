// The values the packet evaluator computes (nft/eval/evaluator.h), and how they compare with the JSON
// of the right-hand side of a match or of a set element key: literals, prefixes, ranges, concats.
// A value is a list of atoms (one per concatenation part); each atom knows its type, so that the
// same JSON literal ("tcp", 80, "10.0.0.1", "new") is read the way the left-hand side means it.
#pragma once

#include <rapidjson/document.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kpn::nft::eval {

// Thrown for anything the evaluator does not model; the trace reports it, never a silent pass.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class AtomType {
  Address,   // ipv4_addr / ipv6_addr
  Integer,   // ports, marks, numgen, hashes, l4proto
  L4Proto,   // an integer that also reads "tcp", "udp", ...
  IfName,    // iifname / oifname: a string, "veth*" in a pattern is a prefix match
  CtState,   // bit flags read from names
  CtStatus,
  Symbol,    // fib type and other plain strings
};

struct Atom {
  AtomType type = AtomType::Integer;
  uint64_t num = 0;                // Integer, L4Proto, CtState, CtStatus
  std::array<uint8_t, 16> addr{};  // Address
  bool v6 = false;
  std::string str;                 // IfName, Symbol

  static Atom integer(uint64_t n, AtomType t = AtomType::Integer);
  static Atom symbol(std::string s, AtomType t = AtomType::Symbol);
  // Throws Unsupported when the text is not an IP address.
  static Atom address(const std::string& text);
  std::string text() const;
};

using Value = std::vector<Atom>;
std::string valueText(const Value& v);

// Reads a literal of the JSON (a string or a number) as an atom of `type`. Throws Unsupported.
Atom readLiteral(const rapidjson::Value& json, AtomType type);
// A literal read without a left-hand side to say its type (map data, dnat targets): numbers are
// integers, strings that parse as addresses are addresses, other strings symbols.
Atom readUntyped(const rapidjson::Value& json);
Value readUntypedValue(const rapidjson::Value& json);

// Does `v` equal or fall inside `pattern`: a literal, {"prefix":..}, {"range":[lo,hi]}, a concat
// of those (one part per atom), or an element wrapped as {"elem":{"val":..}}. Sets and set
// references are the evaluator's business, not this function's.
bool matchesPattern(const Value& v, const rapidjson::Value& pattern);
bool atomMatches(const Atom& a, const rapidjson::Value& pattern);

// Exact-match lookups in big sets: a key that two equal values share, whatever their spelling.
std::string atomKey(const Atom& a);
std::string valueKey(const Value& v);
// The key of a pattern made only of literals, read with the types of `like`'s atoms; false for
// prefixes, ranges, interface wildcards, or literals those types cannot read (then match it with
// matchesPattern, which reports what it cannot read).
bool literalKey(const Value& like, const rapidjson::Value& pattern, std::string* key);

// ct state / ct status names as the kernel's bits.
uint64_t ctStateBit(const std::string& name);
uint64_t ctStatusBit(const std::string& name);

}  // namespace kpn::nft::eval
