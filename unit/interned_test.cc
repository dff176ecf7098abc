// The pooled names of decoded endpoints (api::InternedString) and the endpoint's compact layout.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pkg/api/interned.h"
#include "pkg/api/types.h"

using kpn::api::Endpoint;
using kpn::api::InternedString;

TEST_CASE("interned: equal values share one copy, and compare equal to their text") {
  std::string built = std::string("node-") + "interned-1";
  InternedString a("node-interned-1"), b(built), c("node-interned-2");
  CHECK(a == b);
  CHECK(&a.str() == &b.str());
  CHECK(a != c);
  CHECK(a == std::string("node-interned-1"));
  CHECK(std::string("node-interned-2") == c);
  CHECK(a != std::string("node-interned-2"));
  CHECK(a < c);
  const std::string& asText = a;
  CHECK(asText == "node-interned-1");
}

TEST_CASE("interned: the empty value is the default and holds nothing") {
  size_t before = InternedString::poolSize();
  InternedString none, fromEmpty(""), fromString{std::string()};
  CHECK(none.empty());
  CHECK(none == fromEmpty);
  CHECK(fromString.str().empty());
  CHECK(none == std::string());
  CHECK(InternedString::poolSize() == before);
}

TEST_CASE("interned: a value survives the objects that introduced it, and goes with its last holder") {
  size_t before = InternedString::poolSize();
  InternedString kept;
  {
    auto introducer = std::make_unique<std::string>("zone-interned-survivor");
    InternedString first(*introducer);
    kept = first;
    introducer.reset();
  }
  CHECK(kept == "zone-interned-survivor");
  CHECK(InternedString::poolSize() == before + 1);
  InternedString again("zone-interned-survivor");
  CHECK(again == kept);
  CHECK(InternedString::poolSize() == before + 1);
  kept = InternedString();
  again = InternedString();
  CHECK(InternedString::poolSize() == before);
  // Made again after it was gone: a fresh copy, still equal to a new handle of the same value.
  InternedString reborn("zone-interned-survivor"), twin("zone-interned-survivor");
  CHECK(reborn == twin);
  CHECK(InternedString::poolSize() == before + 1);
}

TEST_CASE("interned: handles made and dropped on several threads at once") {
  size_t before = InternedString::poolSize();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 20000; ++i) {
        InternedString a("node-" + std::to_string(i % 7));
        InternedString b = a;
        InternedString c("node-" + std::to_string(i % 7));
        REQUIRE(b == c);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(InternedString::poolSize() == before);
}

TEST_CASE("endpoint: one address and no hints need no side allocation; the rest round-trips") {
  Endpoint plain;
  plain.address = "10.244.0.1";
  plain.nodeName = "node-a";
  CHECK(plain.addresses() == std::vector<std::string>{"10.244.0.1"});
  CHECK(plain.hintZones().empty());
  CHECK(plain.hintNodes().empty());
  CHECK(sizeof(Endpoint) <= 72);

  Endpoint rich = plain;
  rich.setAddresses({"10.244.0.1", "10.244.0.2"});
  rich.setHints({"zone-a"}, {"node-a"});
  CHECK(rich.address == "10.244.0.1");
  CHECK(rich.addresses() == std::vector<std::string>{"10.244.0.1", "10.244.0.2"});
  CHECK(rich.hintZones() == std::vector<std::string>{"zone-a"});
  CHECK(rich.hintNodes() == std::vector<std::string>{"node-a"});
  CHECK(!(rich == plain));

  // A copy shares the side part, and changing the copy leaves the original alone.
  Endpoint copy = rich;
  CHECK(copy == rich);
  copy.setHints({}, {});
  CHECK(copy.hintZones().empty());
  CHECK(rich.hintZones() == std::vector<std::string>{"zone-a"});
  copy.setAddresses({"10.244.0.1"});
  CHECK(copy == plain);
  CHECK(Endpoint().addresses().empty());
}
