// An ordered list of nft operations, committed as one atomic transaction, written either as
// libnftables JSON (what the daemon commits) or as native nft text (--dry-run, logs).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

enum class Verb { Add, Flush, Delete };
enum class Kind { Table, Chain, Rule, Set, Element };

// Anything that keeps an operation's rule or element alive: usually the immutable Part it
// belongs to, so that an operation costs a pointer, not a copy of the element's strings (a cold
// sync at 10k services carries ~240k operations).
using Keeper = std::shared_ptr<const void>;

struct Op {
  Verb verb;
  Kind kind;
  Family family;
  std::string table;
  std::string name;                     // chain name (Chain, Rule) or set name (Set, Element)
  std::shared_ptr<const Hook> hook;     // add chain: base chains only
  std::shared_ptr<const SetDecl> set;   // add/delete set
  Keeper keep;                          // keeps *rulePtr / *elementPtr alive
  const Rule* rulePtr = nullptr;        // add rule
  const Element* elementPtr = nullptr;  // add/delete element
  const Rule& rule() const { return *rulePtr; }
  const Element& element() const { return *elementPtr; }
  std::optional<Hook> hookValue() const { return hook ? std::optional<Hook>(*hook) : std::nullopt; }
};

class Transaction {
 public:
  void addTable(Family f, const std::string& table);
  void flushTable(Family f, const std::string& table);
  void deleteTable(Family f, const std::string& table);  // the start-up probe's scratch table
  void addChain(Family f, const std::string& table, const std::string& chain, const std::optional<Hook>& hook);
  void flushChain(Family f, const std::string& table, const std::string& chain);
  void deleteChain(Family f, const std::string& table, const std::string& chain);
  // Without a keeper the rule or element is copied; with one (the Part it lives in) it is
  // referenced.
  void addRule(Family f, const std::string& table, const std::string& chain, const Rule& rule, Keeper keep = nullptr);
  void addSet(Family f, const std::string& table, const SetDecl& set);
  void deleteSet(Family f, const std::string& table, const SetDecl& set);
  void flushSet(Family f, const std::string& table, const SetDecl& set);  // every element; the set stays
  void addElement(Family f, const std::string& table, const Element& e, Keeper keep = nullptr);
  void deleteElement(Family f, const std::string& table, const Element& e, Keeper keep = nullptr);
  void append(Transaction&& other);

  const std::vector<Op>& ops() const { return ops_; }
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }

  // {"nftables":[...]}; consecutive element operations on one set share one command.
  std::string toJson() const;
  // Native nft syntax, one command per line; loads with `nft -f`.
  std::string toText() const;

 private:
  std::vector<Op> ops_;
};

// The native declaration of a typeof map (nft 1.0.6 JSON cannot express it), built only from our
// own constant names: "add map ip kube-proxy backends-tcp-0 { typeof ... ; }"; a dynamic set's:
// "add set ip kube-proxy affinity-tcp { typeof ... ; flags dynamic,timeout ; size N ; }".
// nft's default size for a dynamic set is 65535; ours are shared by every affinity service of a
// key space, so they get room for more clients (memory is taken per entry, not up front).
inline constexpr uint32_t kDynamicSetSize = 1048576;
std::string nativeTypeofDeclaration(Family f, const std::string& table, const SetDecl& set);

}  // namespace kpn::nft
