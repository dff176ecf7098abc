// A table's desired elements as a plan against a listing sees them (nft/desired_elements.h):
// each key once, the first Part's copy, in the Parts' order; and the plans built on them.
#include <doctest/doctest.h>

#include "nft/desired_elements.h"
#include "nft/diff.h"

using namespace kpn;
using namespace kpn::nft;

namespace {

PartPtr partOf(std::vector<Element> elements) {
  auto p = std::make_shared<Part>();
  p->elements = std::move(elements);
  return p;
}

Element slot(int service, int n, const std::string& comment = {}) {
  return mapElement("backends-tcp", ex::concat({ex::addr("10.96.0." + std::to_string(service)), ex::number(80), ex::number(n)}),
                    ex::concat({ex::addr("10.244.0." + std::to_string(n + 1)), ex::number(8080)}), comment);
}

Element hairpin(const std::string& ip) { return setElement("hairpin", ex::concat({ex::addr(ip), ex::addr(ip)})); }

size_t adds(const Transaction& t, const std::string& set) {
  size_t n = 0;
  for (const Op& op : t.ops()) n += op.kind == Kind::Element && op.verb == Verb::Add && op.name == set;
  return n;
}

}  // namespace

TEST_CASE("desired elements: a key two Parts hold is there once, with the first Part's copy") {
  Table t{Family::IPv4, "kube-proxy", {}, {}, {}};
  t.parts["svc a"] = partOf({slot(1, 0, "a"), hairpin("10.244.0.1")});
  t.parts["svc b"] = partOf({slot(2, 0, "b"), hairpin("10.244.0.1"), hairpin("10.244.0.2")});
  const DesiredElements d = desiredElements(t);
  REQUIRE(d.count("hairpin") == 1);
  const KeyedElements& pairs = d.at("hairpin");
  REQUIRE(pairs.all().size() == 2);
  CHECK(pairs.all()[0].part == &t.parts.at("svc a"));  // the first owner's copy
  CHECK(pairs.all()[1].element->key() == hairpin("10.244.0.2").key());
  CHECK(elementCount(d) == 4);
  // In the Parts' order, not the keys': a service's elements stay together in --dry-run.
  CHECK(d.at("backends-tcp").all()[0].element->comment() == "a");
  CHECK(d.at("backends-tcp").all()[1].element->comment() == "b");
}

TEST_CASE("desired elements: every key is found through the table's growth, and no other") {
  std::vector<Element> many;
  for (int s = 0; s < 200; ++s)
    for (int n = 0; n < 50; ++n) many.push_back(slot(s, n));
  Table t{Family::IPv4, "kube-proxy", {}, {}, {}};
  t.parts["svc many"] = partOf(many);
  const DesiredElements d = desiredElements(t);
  const KeyedElements& slots = d.at("backends-tcp");
  REQUIRE(slots.all().size() == many.size());
  const Part& part = *t.parts.at("svc many");
  for (size_t i = 0; i < many.size(); ++i) {
    const OwnedElement* found = slots.find(many[i].key());
    REQUIRE(found);
    CHECK(found->element == &part.elements[i]);
  }
  CHECK_FALSE(slots.find(slot(200, 0).key()));
  CHECK_FALSE(slots.find(hairpin("10.244.0.1").key()));
  CHECK_FALSE(KeyedElements().find(slot(1, 0).key()));
  KeyedElements again;
  CHECK(again.add(part.elements[0], t.parts.at("svc many")));
  CHECK_FALSE(again.add(part.elements[0], t.parts.at("svc many")));
}

TEST_CASE("desired elements: a table sized ahead finds every key, and still grows past its size") {
  std::vector<Element> many;
  for (int s = 0; s < 40; ++s)
    for (int n = 0; n < 25; ++n) many.push_back(slot(s, n));
  const PartPtr part = partOf(many);
  KeyedElements keyed;
  keyed.reserve(600);
  for (const Element& e : part->elements) CHECK(keyed.add(e, part));  // 1 000: past the 600 reserved
  for (const Element& e : part->elements) CHECK_FALSE(keyed.add(e, part));
  REQUIRE(keyed.all().size() == many.size());
  for (size_t i = 0; i < many.size(); ++i) {
    const OwnedElement* found = keyed.find(many[i].key());
    REQUIRE(found);
    CHECK(found->element == &part->elements[i]);
  }
  CHECK_FALSE(keyed.find(slot(40, 0).key()));
  KeyedElements none;
  none.reserve(0);
  CHECK_FALSE(none.find(slot(1, 0).key()));
  CHECK(none.add(part->elements[0], part));
  CHECK(none.find(part->elements[0].key()));
}

TEST_CASE("plans against a listing add a shared key once and keep what the kernel holds") {
  Ruleset rs;
  rs.tables.push_back(Table{Family::IPv4, "kube-proxy", {}, {}, {}});
  Table& t = rs.tables[0];
  const SetDecl slots{"backends-tcp", {"ipv4_addr", "inet_service", "integer"}, "ipv4_addr . inet_service", ""};
  const SetDecl pairs{"hairpin", {"ipv4_addr", "ipv4_addr"}, "", ""};
  t.sets = {slots, pairs};
  t.parts["svc a"] = partOf({slot(1, 0), slot(1, 1), hairpin("10.244.0.1")});
  t.parts["svc b"] = partOf({slot(2, 0), hairpin("10.244.0.1")});

  Plan cold = planReconcile({}, rs);
  CHECK(adds(cold.txn, "backends-tcp") == 3);
  CHECK(adds(cold.txn, "hairpin") == 1);
  Plan full = planFull({}, rs);
  CHECK(adds(full.txn, "backends-tcp") == 3);
  CHECK(adds(full.txn, "hairpin") == 1);

  // A restart over a table holding all but one slot, one of them with another value.
  ListedTable k;
  k.exists = true;
  k.sets["backends-tcp"].isMap = true;
  k.sets["backends-tcp"].keyType = slots.keyType;
  k.sets["backends-tcp"].dataType = slots.dataType;
  k.sets["hairpin"].keyType = pairs.keyType;
  k.sets["hairpin"].elements[std::string(hairpin("10.244.0.1").key())] = "";
  k.sets["backends-tcp"].elements[std::string(slot(1, 0).key())] = std::string(slot(1, 0).value());
  k.sets["backends-tcp"].elements[std::string(slot(2, 0).key())] = std::string(slot(3, 0).value()) + "x";
  Plan restart = planReconcile({k}, rs);
  std::string text = restart.txn.toText();
  INFO(text);
  CHECK(adds(restart.txn, "hairpin") == 0);
  CHECK(adds(restart.txn, "backends-tcp") == 2);  // the missing slot, and the changed one again
  CHECK_FALSE(restart.needsFull);
  CHECK(restart.txn.size() == 3);  // ... after deleting the changed one
}
