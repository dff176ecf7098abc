#include "nft/model.h"

#include <mutex>
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
const std::string* internName(const std::string& name) {
  static std::mutex mu;
  static auto* names = new std::unordered_set<std::string>();  // node-based: stable addresses
  std::lock_guard<std::mutex> lock(mu);
  return &*names->insert(name).first;
}
}  // namespace

SetName::SetName() : name_(internName("")) {}
SetName::SetName(const std::string& name) : name_(internName(name)) {}
SetName::SetName(const char* name) : name_(internName(name)) {}

Element setElement(std::string set, Expr key, std::string comment) {
  return Element{std::move(set), std::move(key.json), "", std::move(comment)};
}

Element mapElement(std::string set, Expr key, Expr value, std::string comment) {
  return Element{std::move(set), std::move(key.json), std::move(value.json), std::move(comment)};
}

Element verdictElement(std::string set, Expr key, const std::string& chain, std::string comment) {
  return Element{std::move(set), std::move(key.json), gotoVerdict(chain).json, std::move(comment)};
}

std::string Element::keyText() const { return rawKeyText ? key : exprText(key); }
std::string Element::valueText() const { return exprText(value); }
std::vector<std::string> Element::chainRefs() const {
  std::string target = verdictTarget(value);
  if (target.empty()) return {};
  return {target};
}

void shrinkToFit(Part& part) {
  part.elements.shrink_to_fit();
  for (Element& e : part.elements) {
    e.key.shrink_to_fit();
    e.value.shrink_to_fit();
    e.comment.shrink_to_fit();
  }
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
