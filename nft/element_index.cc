#include "nft/element_index.h"

#include <functional>
#include <iterator>

namespace kpn::nft {

namespace {
uint32_t keyHash(std::string_view key) { return uint32_t(std::hash<std::string_view>()(key)); }
}  // namespace

const IndexedElement* ElementIndex::Table::find(std::string_view key, uint32_t hash) const {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const IndexedElement& s = slots_[i];
    if (!s.element) return nullptr;
    if (s.hash == hash && s.element->key() == key) return &s;
  }
}

IndexedElement& ElementIndex::Table::insert(const IndexedElement& e) {
  if ((used_ + 1) * 5 > slots_.size() * 4) grow();
  const size_t mask = slots_.size() - 1;
  size_t i = e.hash & mask;
  while (slots_[i].element) i = (i + 1) & mask;
  slots_[i] = e;
  ++used_;
  return slots_[i];
}

void ElementIndex::Table::grow() {
  std::vector<IndexedElement> old(slots_.empty() ? 8 : slots_.size() * 2);
  old.swap(slots_);
  used_ = 0;
  for (const IndexedElement& e : old)
    if (e.element) insert(e);
}

void ElementIndex::Table::erase(IndexedElement* slot) {
  const size_t mask = slots_.size() - 1;
  size_t hole = size_t(slot - slots_.data());
  // Backward shift: an entry after the hole moves into it unless its home lies cyclically in
  // (hole, j], where it is still reachable without passing the hole.
  for (size_t j = (hole + 1) & mask; slots_[j].element; j = (j + 1) & mask) {
    size_t home = slots_[j].hash & mask;
    bool reachable = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (reachable) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = IndexedElement{};
  --used_;
}

void ElementIndex::hold(const Element* element, const PartPtr& part) {
  auto [it, inserted] = parts_.try_emplace(part->elements.data(), part, 0);
  ++it->second.second;
}

void ElementIndex::release(const Element* element) {
  auto it = std::prev(parts_.upper_bound(element));  // the Part whose elements begin at or before it
  if (--it->second.second == 0) parts_.erase(it);
}

const IndexedElement* ElementIndex::find(const std::string& setKey, std::string_view keyJson) const {
  auto s = sets_.find(setKey);
  if (s == sets_.end()) return nullptr;
  return s->second.find(keyJson, keyHash(keyJson));
}

void ElementIndex::add(const std::string& setKey, const Element& e, const PartPtr& part) {
  Table& t = sets_[setKey];
  uint32_t hash = keyHash(e.key());
  if (IndexedElement* have = t.find(e.key(), hash)) {
    ++have->count;
    return;
  }
  t.insert(IndexedElement{&e, 1, hash});
  hold(&e, part);
}

void ElementIndex::set(const std::string& setKey, const ElementRef& ref) {
  Table& t = sets_[setKey];
  uint32_t hash = keyHash(ref.element->key());
  IndexedElement* have = t.find(ref.element->key(), hash);
  if (have && have->element == ref.element) {
    have->count = ref.count;
    return;
  }
  hold(ref.element, ref.keep);  // before releasing: the two copies may share a Part
  if (have) {
    release(have->element);
    have->element = ref.element;
    have->count = ref.count;
  } else {
    t.insert(IndexedElement{ref.element, ref.count, hash});
  }
}

void ElementIndex::erase(const std::string& setKey, std::string_view keyJson) {
  auto s = sets_.find(setKey);
  if (s == sets_.end()) return;
  if (IndexedElement* have = s->second.find(keyJson, keyHash(keyJson))) {
    release(have->element);
    s->second.erase(have);
  }
  if (s->second.size() == 0) sets_.erase(s);
}

size_t ElementIndex::size() const {
  size_t n = 0;
  for (const auto& [setKey, elems] : sets_) n += elems.size();
  return n;
}

}  // namespace kpn::nft
