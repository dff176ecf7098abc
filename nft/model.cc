#include "nft/model.h"

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace kpn::nft {

Rule makeRule(const std::vector<Stmt>& stmts, std::string comment) {
  Rule r;
  r.exprJson = "[";
  for (size_t i = 0; i < stmts.size(); ++i) {
    if (i) {
      r.exprJson += ",";
      r.text += " ";
    }
    r.exprJson += stmts[i].json;
    r.text += stmts[i].text;
    r.chainRefs.insert(r.chainRefs.end(), stmts[i].chainRefs.begin(), stmts[i].chainRefs.end());
    r.setRefs.insert(r.setRefs.end(), stmts[i].setRefs.begin(), stmts[i].setRefs.end());
  }
  r.exprJson += "]";
  r.comment = std::move(comment);
  return r;
}

namespace {
// Never shrinks: names are bounded by our layout (and, after a listing, by what our tables held).
const std::string* internShared(const std::string& name) {
  static std::mutex mu;
  static auto* names = new std::unordered_set<std::string>();  // node-based: stable addresses
  std::lock_guard<std::mutex> lock(mu);
  return &*names->insert(name).first;
}

// Every element takes its set's name, and a full render makes them on two threads: each thread
// asks the shared table once per name, then keeps the answer (the names are a few dozen).
const std::string* internName(const std::string& name) {
  thread_local std::unordered_map<std::string, const std::string*> known;
  auto it = known.find(name);
  if (it != known.end()) return it->second;
  const std::string* interned = internShared(name);
  known.emplace(name, interned);
  return interned;
}
}  // namespace

SetName::SetName() : name_(internName("")) {}
SetName::SetName(const std::string& name) : name_(internName(name)) {}
SetName::SetName(const char* name) : name_(internName(name)) {}

Element::Element(SetName set, std::string_view key, std::string_view value, std::string_view comment,
                 bool rawKeyText)
    : set(set),
      keyLen_(uint32_t(key.size())),
      valueLen_(uint32_t(value.size())),
      commentLen_(uint32_t(comment.size())),
      rawKeyText_(rawKeyText) {
  if (size() == 0) return;
  data_.reset(new char[size()]);
  char* p = data_.get();
  for (std::string_view part : {key, value, comment}) {
    if (part.empty()) continue;  // an empty view may have no data at all: memcpy wants a pointer
    std::memcpy(p, part.data(), part.size());
    p += part.size();
  }
}

Element::Element(const Element& o)
    : set(o.set), keyLen_(o.keyLen_), valueLen_(o.valueLen_), commentLen_(o.commentLen_), rawKeyText_(o.rawKeyText_) {
  if (size() == 0) return;
  data_.reset(new char[size()]);
  std::memcpy(data_.get(), o.data_.get(), size());
}

Element& Element::operator=(const Element& o) {
  if (this != &o) *this = Element(o);
  return *this;
}

Element setElement(SetName set, const Expr& key, std::string_view comment) {
  return Element(set, key.json, {}, comment);
}

Element mapElement(SetName set, const Expr& key, const Expr& value, std::string_view comment) {
  return Element(set, key.json, value.json, comment);
}

Element verdictElement(SetName set, const Expr& key, const std::string& chain, std::string_view comment) {
  return Element(set, key.json, gotoVerdict(chain).json, comment);
}

std::string Element::keyText() const { return rawKeyText_ ? std::string(key()) : exprText(key()); }
std::string Element::valueText() const { return exprText(value()); }
std::vector<std::string> Element::chainRefs() const {
  std::string target = verdictTarget(value());
  if (target.empty()) return {};
  return {target};
}

void shrinkToFit(Part& part) {
  part.elements.shrink_to_fit();
  part.chains.shrink_to_fit();
  for (Chain& c : part.chains) {
    c.rules.shrink_to_fit();
    for (Rule& r : c.rules) {
      r.exprJson.shrink_to_fit();
      r.text.shrink_to_fit();
    }
  }
}

}  // namespace kpn::nft
