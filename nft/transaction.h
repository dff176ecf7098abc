// An ordered list of nft operations, committed as one atomic transaction, written either as
// libnftables JSON (what the daemon commits) or as native nft text (--dry-run, logs).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

enum class Verb : uint8_t { Add, Flush, Delete };
enum class Kind : uint8_t { Table, Chain, Rule, Set, Element };

// Anything that keeps an operation's rule or element alive: usually the immutable Part it
// belongs to, so that an operation costs a pointer, not a copy of the element's strings (a cold
// sync at 10k services carries ~240k operations).
using Keeper = std::shared_ptr<const void>;

// 72 bytes (was 144: at 50k services a cold sync's ~550k operations were ~80 MB, twice that while
// the phases were joined): the table name is interned (our two tables, the probe's), and what the
// operation is about (hook, set declaration, rule or element) is one pointer kept alive by `keep`.
struct Op {
  Verb verb;
  Kind kind;
  Family family;
  SetName table;
  std::string name;  // chain name (Chain, Rule) or set name (Set, Element)
  Keeper keep;       // keeps *subject alive
  // Chain: its Hook (add chain of a base chain; else null); Set: its SetDecl; Rule: the Rule;
  // Element: the Element.
  const void* subject = nullptr;
  const Hook* hook() const { return kind == Kind::Chain ? static_cast<const Hook*>(subject) : nullptr; }
  const SetDecl* set() const { return kind == Kind::Set ? static_cast<const SetDecl*>(subject) : nullptr; }
  const Rule& rule() const { return *static_cast<const Rule*>(subject); }
  const Element& element() const { return *static_cast<const Element*>(subject); }
  std::optional<Hook> hookValue() const { return hook() ? std::optional<Hook>(*hook()) : std::nullopt; }
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
  void reserve(size_t ops);
  size_t capacity() const { return ops_.capacity(); }
  // `parts` in order, as one transaction; each part is left empty. The biggest part's buffer is
  // kept when it has room for all and no more than twice that (a cold sync's element adds: ~550k
  // operations at 50k services, 40 MB that a fresh buffer would take and fault in once more): the
  // parts before it go in front of its operations, the ones after it behind. Otherwise one buffer
  // of the total size.
  static Transaction joined(std::initializer_list<Transaction*> parts);

  const std::vector<Op>& ops() const { return ops_; }
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }

  // {"nftables":[...]}; consecutive element operations on one set share one command.
  std::string toJson() const;
  // The same JSON in pieces, so that a big transaction's text never exists whole in this process
  // (at 50k services it is ~75 MB): appends to `out` and, whenever `out` holds pieceBytes or more
  // after a command or an element, hands it to `piece` and clears it. What is left in `out` at the end
  // is the last piece. The pieces, concatenated, are exactly toJson().
  void writeJson(std::string& out, size_t pieceBytes, const std::function<void(std::string&)>& piece) const;
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
