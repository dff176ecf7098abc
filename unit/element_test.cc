// nft::Element keeps key, value and comment in one heap block behind views (nft/model.h).
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "nft/expr.h"
#include "nft/model.h"

using namespace kpn::nft;

TEST_CASE("an element gives back the key, value and comment it was built from") {
  Expr key = ex::concat({ex::addr("10.96.0.1"), ex::symbol("tcp"), ex::number(80)});
  Element e = verdictElement("service-ips", key, "svc-a", "ns/a:http");
  CHECK(e.set.str() == "service-ips");
  CHECK(e.key() == key.json);
  CHECK(e.value() == gotoVerdict("svc-a").json);
  CHECK(e.comment() == "ns/a:http");
  CHECK(e.hasValue());
  CHECK_FALSE(e.rawKeyText());
  CHECK(e.keyText() == "10.96.0.1 . tcp . 80");
  CHECK(e.valueText() == "goto svc-a");
  CHECK(e.chainRefs() == std::vector<std::string>{"svc-a"});
}

TEST_CASE("an element without a value is a set element; one without anything is empty") {
  Element s = setElement("hairpin", ex::addr("10.244.1.2"));
  CHECK(s.key() == "\"10.244.1.2\"");
  CHECK(s.value().empty());
  CHECK(s.comment().empty());
  CHECK_FALSE(s.hasValue());
  CHECK(s.chainRefs().empty());

  Element empty;
  CHECK(empty.key().empty());
  CHECK(empty.value().empty());
  CHECK(empty.comment().empty());
  CHECK_FALSE(empty.hasValue());
  CHECK_FALSE(empty.rawKeyText());
  CHECK(empty == Element());
  CHECK(empty != s);
}

TEST_CASE("a comment never reads as part of the value, nor a value as part of the key") {
  // Same bytes in total, split differently: not equal.
  Element a("m", "\"ab\"", "\"c\"", "");
  Element b("m", "\"ab\"", "", "\"c\"");
  Element c("m", "\"ab\"\"c\"", "", "");
  CHECK(a != b);
  CHECK(a != c);
  CHECK(b != c);
  CHECK(b.comment() == "\"c\"");
  CHECK_FALSE(b.hasValue());
}

TEST_CASE("element equality: set, key, value and comment; the raw-text flag is how it prints, not what it is") {
  Element a("service-ips", "\"10.96.0.1\"", "{\"goto\":{\"target\":\"x\"}}", "ns/a");
  CHECK(a == Element("service-ips", "\"10.96.0.1\"", "{\"goto\":{\"target\":\"x\"}}", "ns/a"));
  CHECK(a != Element("other", "\"10.96.0.1\"", "{\"goto\":{\"target\":\"x\"}}", "ns/a"));
  CHECK(a != Element("service-ips", "\"10.96.0.2\"", "{\"goto\":{\"target\":\"x\"}}", "ns/a"));
  CHECK(a != Element("service-ips", "\"10.96.0.1\"", "{\"goto\":{\"target\":\"y\"}}", "ns/a"));
  CHECK(a != Element("service-ips", "\"10.96.0.1\"", "{\"goto\":{\"target\":\"x\"}}", "ns/b"));
  CHECK(a == Element("service-ips", "\"10.96.0.1\"", "{\"goto\":{\"target\":\"x\"}}", "ns/a", true));

  Element raw("service-ips", "{\"concat\":[\"10.96.0.1\",\"tcp\",80]}", {}, {}, /*rawKeyText=*/true);
  CHECK(raw.rawKeyText());
  CHECK(raw.keyText() == "{\"concat\":[\"10.96.0.1\",\"tcp\",80]}");
}

TEST_CASE("copies and moves of an element own their text") {
  Element a = mapElement("backends", ex::number(3), ex::concat({ex::addr("10.244.1.5"), ex::number(8080)}), "ns/a:http");
  const std::string key(a.key()), value(a.value()), comment(a.comment());
  Element copy = a;
  CHECK(copy == a);
  CHECK(copy.key().data() != a.key().data());  // its own block
  Element assigned;
  assigned = copy;
  CHECK(assigned == a);
  Element moved = std::move(copy);
  CHECK(moved == a);
  Element moveAssigned;
  moveAssigned = std::move(moved);
  a = Element();  // the original goes away: the copies still read their text
  CHECK(assigned.key() == key);
  CHECK(assigned.value() == value);
  CHECK(assigned.comment() == comment);
  CHECK(moveAssigned.key() == key);
  CHECK(moveAssigned.value() == value);
  CHECK(moveAssigned.comment() == comment);
  assigned = assigned;  // self-assignment keeps it
  CHECK(assigned.key() == key);
  std::vector<Element> grown;
  for (int i = 0; i < 100; ++i) grown.push_back(setElement("s", ex::number(i), "c" + std::to_string(i)));
  for (int i = 0; i < 100; ++i) {
    CHECK(grown[i].key() == std::to_string(i));
    CHECK(grown[i].comment() == "c" + std::to_string(i));
  }
}

TEST_CASE("an element is small: one block of text behind a name pointer") {
  CHECK(sizeof(Element) <= 32);
}
