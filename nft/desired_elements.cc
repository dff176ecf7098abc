#include "nft/desired_elements.h"

#include <functional>

namespace kpn::nft {

namespace {
uint32_t hashOf(std::string_view key) { return static_cast<uint32_t>(std::hash<std::string_view>{}(key)); }
constexpr uint64_t kIndexMask = 0xffffffffu;
}  // namespace

bool KeyedElements::add(const Element& e, const PartPtr& part) {
  if ((items_.size() + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
  const std::string_view key = e.key();
  const uint32_t h = hashOf(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t s = slots_[i];
    if (s == 0) {
      items_.push_back({&e, &part});
      slots_[i] = uint64_t(h) << 32 | items_.size();
      return true;
    }
    if (uint32_t(s >> 32) == h && items_[(s & kIndexMask) - 1].element->key() == key) return false;
  }
}

const OwnedElement* KeyedElements::find(std::string_view keyJson) const {
  if (slots_.empty()) return nullptr;
  const uint32_t h = hashOf(keyJson);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t s = slots_[i];
    if (s == 0) return nullptr;
    const OwnedElement& o = items_[(s & kIndexMask) - 1];
    if (uint32_t(s >> 32) == h && o.element->key() == keyJson) return &o;
  }
}

void KeyedElements::reserve(size_t n) {
  items_.reserve(n);
  size_t slots = 16;
  while ((n + 1) * 2 > slots) slots *= 2;  // add()'s bound: at most half full
  if (slots > slots_.size()) rehash(slots);
}

void KeyedElements::rehash(size_t slots) {
  std::vector<uint64_t> old;
  old.swap(slots_);
  slots_.assign(slots, 0);
  const size_t mask = slots_.size() - 1;
  for (uint64_t s : old) {
    if (s == 0) continue;
    size_t i = (s >> 32) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

DesiredElements desiredElements(const Table& t) {
  DesiredElements out;
  // Consecutive elements of a Part are mostly of one set: remember the last one's entry.
  const std::string* lastName = nullptr;
  // Counted first, so that each set's vector and table are sized once instead of grown by
  // doubling (at 50k services ~550k elements: ~17 MB less fresh memory, and no rehashes).
  {
    std::map<std::string_view, size_t> counts;
    size_t* count = nullptr;
    for (const auto& [owner, part] : t.parts)
      for (const Element& e : part->elements) {
        const std::string& name = e.set.str();
        if (&name != lastName) {
          lastName = &name;
          count = &counts[name];
        }
        ++*count;
      }
    for (const auto& [name, n] : counts) out[name].reserve(n);
    lastName = nullptr;
  }
  KeyedElements* last = nullptr;
  for (const auto& [owner, part] : t.parts)
    for (const Element& e : part->elements) {
      const std::string& name = e.set.str();
      if (&name != lastName) {
        lastName = &name;
        last = &out[name];
      }
      last->add(e, part);
    }
  return out;
}

size_t elementCount(const DesiredElements& d) {
  size_t n = 0;
  for (const auto& [name, elems] : d) n += elems.all().size();
  return n;
}

}  // namespace kpn::nft
