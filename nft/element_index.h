// Element presence with reference counts: several owners may contribute the same set element (the
// hairpin pair of a pod that backs several services); it stays while any owner still has it.
// The index copies no strings: each entry points at one owner's copy of the element, and the index
// keeps the Parts those copies live in alive. An entry is 16 bytes in an open-addressed table per
// set, and a Part is held once however many of its elements are indexed: at 10k x 10 (~110k
// elements) node-based maps with a key view and a Part pointer per entry were ~8.5 MiB, this ~3.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

// What the index holds for one key: the committed copy and how many owners have it.
struct IndexedElement {
  const Element* element = nullptr;  // null: a free slot
  int count = 0;
  uint32_t hash = 0;  // of element->key(), so that growing never reads the keys again
  std::string_view valueJson() const { return element->value(); }
};

// An update to an entry: `keep` is the Part `element` lives in; it may be null only when `element`
// is the copy already indexed (a change of count).
struct ElementRef {
  int count = 0;
  const Element* element = nullptr;
  PartPtr keep;
};

// By set ("family|table|set"), then by key JSON.
class ElementIndex {
 public:
  const IndexedElement* find(const std::string& setKey, std::string_view keyJson) const;
  // One more owner of e (which lives in part); the first owner's copy stays the indexed one.
  void add(const std::string& setKey, const Element& e, const PartPtr& part);
  // Sets the entry of ref.element's key to ref.
  void set(const std::string& setKey, const ElementRef& ref);
  void erase(const std::string& setKey, std::string_view keyJson);
  size_t size() const;

 private:
  // Linear probing over a power-of-two array, at most 80% full; erasing shifts back the entries
  // after the hole, so lookups never need tombstones.
  class Table {
   public:
    const IndexedElement* find(std::string_view key, uint32_t hash) const;
    IndexedElement* find(std::string_view key, uint32_t hash) {
      return const_cast<IndexedElement*>(static_cast<const Table*>(this)->find(key, hash));
    }
    IndexedElement& insert(const IndexedElement& e);  // e's key must not be present
    void erase(IndexedElement* slot);
    size_t size() const { return used_; }

   private:
    void grow();
    std::vector<IndexedElement> slots_;
    size_t used_ = 0;
  };
  // The Part holding element gets one more (or one fewer) indexed copy.
  void hold(const Element* element, const PartPtr& part);
  void release(const Element* element);

  std::unordered_map<std::string, Table> sets_;
  // By the address of each held Part's first element, so that an element's Part is found by address.
  std::map<const Element*, std::pair<PartPtr, size_t>> parts_;
};

}  // namespace kpn::nft
