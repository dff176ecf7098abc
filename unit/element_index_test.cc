// nft::ElementIndex (nft/element_index.h): an open-addressed table per set over the Parts' own
// elements; checked against a plain map through growth, erasure and re-pointing.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "nft/element_index.h"
#include "nft/expr.h"

using namespace kpn::nft;

namespace {
std::shared_ptr<Part> partOf(int from, int to) {
  auto p = std::make_shared<Part>();
  for (int i = from; i < to; ++i) p->elements.push_back(setElement("s", ex::number(i), "c"));
  return p;
}
}  // namespace

TEST_CASE("the element index agrees with a map through growth, erasure and re-pointing") {
  auto a = partOf(0, 3000);
  auto b = partOf(0, 3000);  // the same keys in another Part
  ElementIndex idx;
  std::map<std::string, std::pair<int, const Element*>> want;
  for (const Element& e : a->elements) {
    idx.add("ip|t|s", e, a);
    want[std::string(e.key())] = {1, &e};
  }
  std::mt19937 rng(27);
  for (int round = 0; round < 20000; ++round) {
    int i = int(rng() % 3000);
    std::string key = std::to_string(i);
    switch (rng() % 4) {
      case 0:  // erase
        idx.erase("ip|t|s", key);
        want.erase(key);
        break;
      case 1:  // (re-)add b's copy: re-points an existing entry
        idx.set("ip|t|s", ElementRef{2, &b->elements[i], b});
        want[key] = {2, &b->elements[i]};
        break;
      case 2:  // a's copy back
        idx.set("ip|t|s", ElementRef{1, &a->elements[i], a});
        want[key] = {1, &a->elements[i]};
        break;
      case 3:  // a count change of the indexed copy
        if (auto w = want.find(key); w != want.end()) {
          idx.set("ip|t|s", ElementRef{7, w->second.second, nullptr});
          w->second.first = 7;
        }
        break;
    }
  }
  CHECK(idx.size() == want.size());
  for (int i = 0; i < 3000; ++i) {
    std::string key = std::to_string(i);
    const IndexedElement* got = idx.find("ip|t|s", key);
    auto w = want.find(key);
    if (w == want.end()) {
      CHECK(got == nullptr);
      continue;
    }
    REQUIRE(got != nullptr);
    CHECK(got->count == w->second.first);
    CHECK(got->element == w->second.second);
  }
  CHECK(idx.find("ip|t|other", "1") == nullptr);
}

TEST_CASE("the element index keeps each Part its entries point into, and only those") {
  auto a = partOf(0, 10);
  auto b = partOf(0, 10);
  std::weak_ptr<Part> weakA = a, weakB = b;
  ElementIndex idx;
  for (const Element& e : a->elements) idx.add("ip|t|s", e, a);
  for (const Element& e : b->elements) idx.add("ip|t|s", e, b);  // counts only: a's copies stay
  CHECK(idx.find("ip|t|s", "3")->count == 2);
  CHECK(idx.find("ip|t|s", "3")->element == &a->elements[3]);
  a.reset();
  b.reset();
  CHECK_FALSE(weakA.expired());
  CHECK(weakB.expired());  // nothing of b was indexed
  auto b2 = partOf(0, 10);
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(weakA.expired());
    idx.set("ip|t|s", ElementRef{1, &b2->elements[i], b2});
  }
  CHECK(weakA.expired());  // every entry re-pointed: a went
  CHECK(idx.find("ip|t|s", "9")->element->key() == "9");
  for (int i = 0; i < 10; ++i) idx.erase("ip|t|s", std::to_string(i));
  CHECK(idx.size() == 0);
  CHECK(b2.use_count() == 1);
}
