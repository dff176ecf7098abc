// The desired (or committed) content of our nft tables as plain values.
// A table is a few set/map declarations plus "parts": each part is what one owner (the base
// layout, or one Service) contributes — its chains and its set/map elements. Parts are shared
// immutable values, so an unchanged owner costs one pointer comparison when diffing.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "nft/expr.h"

namespace kpn::nft {

struct Rule {
  std::string exprJson;  // the rule's "expr" array, compact, as nft lists it
  std::string text;      // native statements, without the comment
  std::string comment;
  std::vector<std::string> chainRefs, setRefs;
  bool operator==(const Rule& o) const { return exprJson == o.exprJson && comment == o.comment; }
  bool operator!=(const Rule& o) const { return !(*this == o); }
};
Rule makeRule(const std::vector<Stmt>& stmts, std::string comment = "");

struct Hook {
  std::string type;  // filter | nat
  std::string hook;  // prerouting | input | forward | output | postrouting
  int priority = 0;  // integers only: nft 1.0.6 JSON turns a named priority into a regular chain
  bool operator==(const Hook& o) const { return type == o.type && hook == o.hook && priority == o.priority; }
};

struct Chain {
  std::string name;
  std::optional<Hook> hook;
  std::vector<Rule> rules;
  bool operator==(const Chain& o) const { return name == o.name && hook == o.hook && rules == o.rules; }
};

struct SetDecl {
  std::string name;
  std::vector<std::string> keyType;  // e.g. {"ipv4_addr","inet_proto","inet_service"}
  std::string dataType;              // "" for a set, "verdict" for a verdict map
  // Non-empty: a map nft 1.0.6 JSON cannot declare (typeof), declared once at start-up in native
  // syntax, e.g. "numgen random mod 1 : ip daddr . tcp dport". keyType/dataType are then unused.
  std::string typeofSpec;
  // A set the data path fills (`update @set { … timeout Ns }`: session affinity): declared natively
  // with its typeofSpec as `add set … { typeof …; flags dynamic,timeout; size … }`. Its elements
  // belong to the kernel: a reconcile never deletes them and a full resync never flushes them, so
  // they survive restarts and failed syncs. (Without a typeofSpec, as the start-up probe declares
  // one, it goes in JSON with its keyType and the timeout flag.)
  bool dynamic = false;
  // Elements may hold prefixes and ranges (`flags interval`). With a concatenated key the kernel
  // keeps them in a pipapo set and refuses an element that overlaps another ("File exists").
  bool interval = false;
  bool operator==(const SetDecl& o) const {
    return name == o.name && keyType == o.keyType && dataType == o.dataType && typeofSpec == o.typeofSpec &&
           dynamic == o.dynamic && interval == o.interval;
  }
};

// A set or map name as elements hold it: one pointer to a process-wide copy of the name (the
// names are few — our constant set names and the backend map shards — and elements many).
class SetName {
 public:
  SetName();
  SetName(const std::string& name);  // NOLINT: implicit, a name is a name
  SetName(const char* name);          // NOLINT
  const std::string& str() const { return *name_; }
  operator const std::string&() const { return *name_; }  // NOLINT
  bool operator==(const SetName& o) const { return name_ == o.name_; }
  bool operator!=(const SetName& o) const { return name_ != o.name_; }

 private:
  const std::string* name_;
};

// Elements keep only nft's JSON spelling of key and value: at 10k services a Part holds ~110k of
// them, and the native text (--dry-run, logs) is derived on demand by exprText(). Key, value and
// comment live in one heap block (32 bytes of element instead of 112 plus three string blocks:
// ~8 MiB of the settled heap at 10k x 10); the accessors are views into it.
class Element {
 public:
  SetName set;

  Element() : commentLen_(0), rawKeyText_(0) {}
  // value empty: a set element. rawKeyText: an element known only by a listed key (a stale kernel
  // element to delete): its text is written as the key's JSON, as it always was.
  Element(SetName set, std::string_view key, std::string_view value = {}, std::string_view comment = {},
          bool rawKeyText = false);
  Element(const Element& o);
  Element(Element&& o) noexcept = default;
  Element& operator=(const Element& o);
  Element& operator=(Element&& o) noexcept = default;

  std::string_view key() const { return {data_.get(), keyLen_}; }      // JSON
  std::string_view value() const { return {data_.get() + keyLen_, valueLen_}; }  // JSON; empty for a set element
  std::string_view comment() const { return {data_.get() + keyLen_ + valueLen_, commentLen_}; }
  bool rawKeyText() const { return rawKeyText_; }
  bool hasValue() const { return valueLen_ != 0; }
  std::string keyText() const;
  std::string valueText() const;
  // The chains a verdict value points at (goto/jump), for the fake's reference checks.
  std::vector<std::string> chainRefs() const;
  bool operator==(const Element& o) const {
    return set == o.set && keyLen_ == o.keyLen_ && valueLen_ == o.valueLen_ && commentLen_ == o.commentLen_ &&
           (size() == 0 || std::memcmp(data_.get(), o.data_.get(), size()) == 0);
  }
  bool operator!=(const Element& o) const { return !(*this == o); }

 private:
  size_t size() const { return size_t(keyLen_) + valueLen_ + commentLen_; }
  std::unique_ptr<char[]> data_;  // key, value, comment; no terminators; null when all are empty
  uint32_t keyLen_ = 0, valueLen_ = 0;
  uint32_t commentLen_ : 31;
  uint32_t rawKeyText_ : 1;
};
// The element keeps its own copy of the key's and value's JSON and of the comment (one block):
// the arguments are only read.
Element setElement(SetName set, const Expr& key, std::string_view comment = {});
Element mapElement(SetName set, const Expr& key, const Expr& value, std::string_view comment = {});
Element verdictElement(SetName set, const Expr& key, const std::string& gotoChain, std::string_view comment = {});

struct Part {
  std::vector<Chain> chains;
  std::vector<Element> elements;
  bool operator==(const Part& o) const { return chains == o.chains && elements == o.elements; }
};
using PartPtr = std::shared_ptr<const Part>;
// Gives back the spare capacity of a finished Part's vectors and strings: Parts live as long as
// they are committed, and at 10k services their growth slack was ~20 MiB of the daemon's RSS.
void shrinkToFit(Part& part);

struct Table {
  Family family = Family::IPv4;
  std::string name;
  std::vector<SetDecl> sets;
  // Named counter objects (`counter name` in rules; read by the metrics, nft/kernel/counter_objects.h):
  // declared with the start-up declarations, never deleted or reset by a sync, so their counts
  // survive restarts, failed syncs and full resyncs.
  std::vector<std::string> counters;
  std::map<std::string, PartPtr> parts;  // by owner
};

struct Ruleset {
  std::vector<Table> tables;
};

}  // namespace kpn::nft
