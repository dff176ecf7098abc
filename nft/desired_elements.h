// One table's desired elements, set by set, flattened across its Parts for a plan against a
// listing (start-up, repair, full): each key once, with the Part that holds it.
//
// A cold start at 50k services x 10 flattens ~550k elements. Ordered maps of string_view keys
// cost ~450 ms there (10x the 10k figure for 5x the elements: each insert walked ~20 nodes and
// their keys, cache misses all the way); this keeps each set's elements in one vector, in the
// Parts' order (owner, then as rendered: a service's elements stay together in --dry-run), and
// finds keys through an open-addressing table of hashes.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "nft/model.h"

namespace kpn::nft {

struct OwnedElement {
  const Element* element;
  const PartPtr* part;  // the Part element lives in
};

// One set's elements, each key once: the first Part's copy (the kernel holds one element per key).
class KeyedElements {
 public:
  // False (and nothing added) when the key is already there.
  bool add(const Element& e, const PartPtr& part);
  // Room for `n` elements: added up to that many, the vector and the table are not grown again.
  void reserve(size_t n);
  const OwnedElement* find(std::string_view keyJson) const;
  const std::vector<OwnedElement>& all() const { return items_; }

 private:
  void rehash(size_t slots);
  std::vector<OwnedElement> items_;
  // Power-of-two table at most half full; an entry is (hash << 32) | (index into items_ + 1), 0 empty.
  std::vector<uint64_t> slots_;
};

// Set name -> its elements; ordered by set name, so that a plan's element commands come out in
// the same order on every run.
using DesiredElements = std::map<std::string_view, KeyedElements>;

DesiredElements desiredElements(const Table& t);

// How many elements all sets hold together (the size of a cold start's element phase).
size_t elementCount(const DesiredElements& d);

}  // namespace kpn::nft
