#include "nft/transaction.h"

#include <cstdint>
#include <iterator>

#include "nft/json_text.h"

namespace kpn::nft {

namespace {

Op makeOp(Verb v, Kind k, Family f, const std::string& table, const std::string& name) {
  return Op{v, k, f, SetName(table), name, nullptr, nullptr};
}

// Points the operation at value: at the keeper's copy when there is one, else at a copy of its own.
template <class T>
void point(Op& op, const T& value, Keeper keep) {
  if (!keep) {
    auto copy = std::make_shared<const T>(value);
    op.subject = copy.get();
    op.keep = std::move(copy);
  } else {
    op.subject = &value;
    op.keep = std::move(keep);
  }
}

const char* verbName(Verb v) {
  switch (v) {
    case Verb::Add: return "add";
    case Verb::Flush: return "flush";
    case Verb::Delete: return "delete";
  }
  return "?";
}

void appendObjectHead(std::string& out, const Op& op) {
  out += "\"family\":\"";
  out += familyName(op.family);
  out += "\",\"table\":";
  appendJsonString(out, op.table.str());
}

void appendTypeJson(std::string& out, const std::vector<std::string>& types) {
  if (types.size() == 1) {
    appendJsonString(out, types[0]);
    return;
  }
  out += "[";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) out += ",";
    appendJsonString(out, types[i]);
  }
  out += "]";
}

// One element as it goes into an "elem" array; keysOnly for deletes. Appended in place: a cold
// sync writes ~110k of them, and temporaries per element were a visible share of its allocations.
void appendElementJson(std::string& out, const Element& e, bool keysOnly) {
  bool pair = !keysOnly && e.hasValue();
  if (pair) out += '[';
  if (!keysOnly && !e.comment().empty()) {
    out += "{\"elem\":{\"val\":";
    out += e.key();
    out += ",\"comment\":";
    appendJsonString(out, e.comment());
    out += "}}";
  } else {
    out += e.key();
  }
  if (pair) {
    out += ',';
    out += e.value();
    out += ']';
  }
}

std::string elementText(const Element& e, bool keysOnly) {
  std::string s = e.keyText();
  if (!keysOnly && !e.comment().empty()) s += " comment " + nftQuoted(e.comment());
  if (!keysOnly && e.hasValue()) s += " : " + e.valueText();
  return s;
}

std::string typeText(const std::vector<std::string>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? " . " : "") + types[i];
  return s;
}

}  // namespace

void Transaction::addTable(Family f, const std::string& t) { ops_.push_back(makeOp(Verb::Add, Kind::Table, f, t, "")); }
void Transaction::flushTable(Family f, const std::string& t) { ops_.push_back(makeOp(Verb::Flush, Kind::Table, f, t, "")); }
void Transaction::deleteTable(Family f, const std::string& t) { ops_.push_back(makeOp(Verb::Delete, Kind::Table, f, t, "")); }
void Transaction::addChain(Family f, const std::string& t, const std::string& c, const std::optional<Hook>& hook) {
  ops_.push_back(makeOp(Verb::Add, Kind::Chain, f, t, c));
  if (hook) point(ops_.back(), *hook, nullptr);
}
void Transaction::flushChain(Family f, const std::string& t, const std::string& c) { ops_.push_back(makeOp(Verb::Flush, Kind::Chain, f, t, c)); }
void Transaction::deleteChain(Family f, const std::string& t, const std::string& c) { ops_.push_back(makeOp(Verb::Delete, Kind::Chain, f, t, c)); }
void Transaction::addRule(Family f, const std::string& t, const std::string& c, const Rule& r, Keeper keep) {
  ops_.push_back(makeOp(Verb::Add, Kind::Rule, f, t, c));
  point(ops_.back(), r, std::move(keep));
}
void Transaction::addSet(Family f, const std::string& t, const SetDecl& s) {
  ops_.push_back(makeOp(Verb::Add, Kind::Set, f, t, s.name));
  point(ops_.back(), s, nullptr);
}
void Transaction::deleteSet(Family f, const std::string& t, const SetDecl& s) {
  ops_.push_back(makeOp(Verb::Delete, Kind::Set, f, t, s.name));
  point(ops_.back(), s, nullptr);
}
void Transaction::flushSet(Family f, const std::string& t, const SetDecl& s) {
  ops_.push_back(makeOp(Verb::Flush, Kind::Set, f, t, s.name));
  point(ops_.back(), s, nullptr);
}
void Transaction::addElement(Family f, const std::string& t, const Element& e, Keeper keep) {
  ops_.push_back(makeOp(Verb::Add, Kind::Element, f, t, e.set));
  point(ops_.back(), e, std::move(keep));
}
void Transaction::deleteElement(Family f, const std::string& t, const Element& e, Keeper keep) {
  ops_.push_back(makeOp(Verb::Delete, Kind::Element, f, t, e.set));
  point(ops_.back(), e, std::move(keep));
}
void Transaction::append(Transaction&& other) {
  if (ops_.empty() && ops_.capacity() < other.ops_.size()) {
    ops_ = std::move(other.ops_);
  } else {
    ops_.reserve(ops_.size() + other.ops_.size());
    std::move(other.ops_.begin(), other.ops_.end(), std::back_inserter(ops_));
  }
  std::vector<Op>().swap(other.ops_);  // its buffer goes now, not when `other` does
}

void Transaction::reserve(size_t ops) { ops_.reserve(ops); }

Transaction Transaction::joined(std::initializer_list<Transaction*> parts) {
  size_t total = 0;
  Transaction* biggest = nullptr;
  for (Transaction* p : parts) {
    total += p->size();
    if (!biggest || p->size() > biggest->size()) biggest = p;
  }
  Transaction out;
  // Kept only when its spare room is no more than it holds: a plan that reserved for a cold start
  // and found the kernel's table nearly whole does not hand on a mostly empty buffer.
  if (!biggest || biggest->capacity() < total || biggest->capacity() > 2 * total) {
    out.reserve(total);
    for (Transaction* p : parts) out.append(std::move(*p));
    return out;
  }
  auto it = parts.begin();
  size_t frontSize = 0;
  for (auto f = it; *f != biggest; ++f) frontSize += (*f)->size();
  std::vector<Op> front;
  front.reserve(frontSize);
  for (; *it != biggest; ++it) {
    std::move((*it)->ops_.begin(), (*it)->ops_.end(), std::back_inserter(front));
    std::vector<Op>().swap((*it)->ops_);
  }
  out.ops_ = std::move(biggest->ops_);
  biggest->ops_.clear();
  // Within the capacity: the operations already there move up in place, no new buffer.
  out.ops_.insert(out.ops_.begin(), std::make_move_iterator(front.begin()), std::make_move_iterator(front.end()));
  for (++it; it != parts.end(); ++it) out.append(std::move(**it));
  return out;
}

std::string Transaction::toJson() const {
  std::string out;
  writeJson(out, SIZE_MAX, nullptr);
  return out;
}

void Transaction::writeJson(std::string& out, size_t pieceBytes, const std::function<void(std::string&)>& piece) const {
  auto handOver = [&] {
    if (out.size() < pieceBytes || !piece) return;
    piece(out);
    out.clear();
  };
  out += "{\"nftables\":[";
  bool first = true;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (!first) out += ",\n";
    first = false;
    out += "{\"";
    out += verbName(op.verb);
    out += "\":{";
    switch (op.kind) {
      case Kind::Table:
        out += "\"table\":{\"family\":\"";
        out += familyName(op.family);
        out += "\",\"name\":" + jsonString(op.table.str()) + "}";
        break;
      case Kind::Chain:
        out += "\"chain\":{";
        appendObjectHead(out, op);
        out += ",\"name\":" + jsonString(op.name);
        if (op.verb == Verb::Add && op.hook()) {
          out += ",\"type\":" + jsonString(op.hook()->type) + ",\"hook\":" + jsonString(op.hook()->hook) +
                 ",\"prio\":" + std::to_string(op.hook()->priority) + ",\"policy\":\"accept\"";
        }
        out += "}";
        break;
      case Kind::Rule:
        out += "\"rule\":{";
        appendObjectHead(out, op);
        out += ",\"chain\":" + jsonString(op.name);
        if (!op.rule().comment.empty()) out += ",\"comment\":" + jsonString(op.rule().comment);
        out += ",\"expr\":" + op.rule().exprJson + "}";
        break;
      case Kind::Set: {
        bool isMap = !op.set()->dataType.empty() || (!op.set()->typeofSpec.empty() && !op.set()->dynamic);
        out += isMap ? "\"map\":{" : "\"set\":{";
        appendObjectHead(out, op);
        out += ",\"name\":" + jsonString(op.name);
        if (op.verb == Verb::Add) {
          out += ",\"type\":";
          appendTypeJson(out, op.set()->keyType);
          if (isMap) out += ",\"map\":" + jsonString(op.set()->dataType);
          // A dynamic set with a plain key type (the start-up probe's; ours have a typeofSpec and
          // are declared natively): nft 1.0.6 JSON takes "timeout" but not "dynamic" as a flag, and
          // adds dynamic itself for the set's update statement.
          if (op.set()->dynamic) out += ",\"flags\":[\"timeout\"]";
          else if (op.set()->interval) out += ",\"flags\":[\"interval\"]";
        }
        out += "}";
        break;
      }
      case Kind::Element: {
        out += "\"element\":{";
        appendObjectHead(out, op);
        out += ",\"name\":" + jsonString(op.name) + ",\"elem\":[";
        // Batch the run of element operations with the same verb on the same set.
        size_t j = i;
        for (; j < ops_.size(); ++j) {
          const Op& o = ops_[j];
          if (o.kind != Kind::Element || o.verb != op.verb || o.family != op.family || o.name != op.name ||
              o.table != op.table)
            break;
          if (j != i) out += ",";
          appendElementJson(out, o.element(), op.verb == Verb::Delete);
          handOver();  // a run of elements can be the bulk of the transaction: pieces may split it
        }
        i = j - 1;
        out += "]}";
        break;
      }
    }
    out += "}}";
    handOver();
  }
  out += "]}";
}

std::string Transaction::toText() const {
  std::string out;
  for (const Op& op : ops_) {
    std::string head = std::string(verbName(op.verb)) + " ";
    std::string where = std::string(familyName(op.family)) + " " + op.table.str();
    switch (op.kind) {
      case Kind::Table:
        out += head + "table " + where + "\n";
        break;
      case Kind::Chain:
        out += head + "chain " + where + " " + op.name;
        if (op.verb == Verb::Add && op.hook()) {
          out += " { type " + op.hook()->type + " hook " + op.hook()->hook + " priority " +
                 std::to_string(op.hook()->priority) + " ; policy accept ; }";
        }
        out += "\n";
        break;
      case Kind::Rule:
        out += head + "rule " + where + " " + op.name + " " + op.rule().text;
        if (!op.rule().comment.empty()) out += " comment " + nftQuoted(op.rule().comment);
        out += "\n";
        break;
      case Kind::Set:
        if (op.verb == Verb::Add && !op.set()->typeofSpec.empty()) {
          out += nativeTypeofDeclaration(op.family, op.table, *op.set()) + "\n";
        } else if (op.verb == Verb::Add) {
          bool isMap = !op.set()->dataType.empty();
          out += head + (isMap ? "map " : "set ") + where + " " + op.name + " { type " + typeText(op.set()->keyType) +
                 (isMap ? " : " + op.set()->dataType : "") + (op.set()->dynamic ? " ; flags dynamic,timeout" : "") +
                 (op.set()->interval ? " ; flags interval" : "") + " ; }\n";
        } else {
          bool isMap = !op.set()->dataType.empty() || (!op.set()->typeofSpec.empty() && !op.set()->dynamic);
          out += head + (isMap ? "map " : "set ") + where + " " + op.name + "\n";
        }
        break;
      case Kind::Element:
        out += head + "element " + where + " " + op.name + " { " +
               elementText(op.element(), op.verb == Verb::Delete) + " }\n";
        break;
    }
  }
  return out;
}

std::string nativeTypeofDeclaration(Family f, const std::string& table, const SetDecl& set) {
  if (set.dynamic)
    return std::string("add set ") + familyName(f) + " " + table + " " + set.name + " { typeof " + set.typeofSpec +
           " ; flags dynamic,timeout ; size " + std::to_string(kDynamicSetSize) + " ; }";
  return std::string("add map ") + familyName(f) + " " + table + " " + set.name + " { typeof " +
         set.typeofSpec + " ; }";
}

}  // namespace kpn::nft
