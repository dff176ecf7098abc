#include <doctest/doctest.h>

#include <cstdint>

#include "nft/expr.h"
#include "nft/rule_text.h"
#include "nft/transaction.h"

using namespace kpn::nft;

TEST_CASE("transaction JSON uses the shapes libnftables 1.0.6 accepts and lists back") {
  Transaction t;
  t.addTable(Family::IPv4, "kube-proxy");
  t.addChain(Family::IPv4, "kube-proxy", "nat-output", Hook{"nat", "output", -100});
  t.addChain(Family::IPv4, "kube-proxy", "services", std::nullopt);
  t.addRule(Family::IPv4, "kube-proxy", "nat-output", makeRule({st::jump("services")}, "why"));
  t.addSet(Family::IPv4, "kube-proxy", SetDecl{"service-ips", {"ipv4_addr", "inet_proto", "inet_service"}, "verdict", ""});
  Expr key = ex::concat({ex::addr("10.96.0.1"), ex::symbol("tcp"), ex::number(80)});
  t.addElement(Family::IPv4, "kube-proxy", verdictElement("service-ips", key, "services", "ns/a:http"));
  t.addElement(Family::IPv4, "kube-proxy", verdictElement("service-ips", ex::concat({ex::addr("10.96.0.2"), ex::symbol("udp"), ex::number(53)}), "services"));
  t.deleteElement(Family::IPv4, "kube-proxy", verdictElement("service-ips", key, "services", "ns/a:http"));
  CHECK(t.size() == 8);
  CHECK(t.toJson() ==
        "{\"nftables\":[{\"add\":{\"table\":{\"family\":\"ip\",\"name\":\"kube-proxy\"}}},\n"
        "{\"add\":{\"chain\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"name\":\"nat-output\",\"type\":\"nat\",\"hook\":\"output\",\"prio\":-100,\"policy\":\"accept\"}}},\n"
        "{\"add\":{\"chain\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"name\":\"services\"}}},\n"
        "{\"add\":{\"rule\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"chain\":\"nat-output\",\"comment\":\"why\",\"expr\":[{\"jump\":{\"target\":\"services\"}}]}}},\n"
        "{\"add\":{\"map\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"name\":\"service-ips\",\"type\":[\"ipv4_addr\",\"inet_proto\",\"inet_service\"],\"map\":\"verdict\"}}},\n"
        // two adds on one set share one command; the comment wraps the key
        "{\"add\":{\"element\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"name\":\"service-ips\",\"elem\":["
        "[{\"elem\":{\"val\":{\"concat\":[\"10.96.0.1\",\"tcp\",80]},\"comment\":\"ns/a:http\"}},{\"goto\":{\"target\":\"services\"}}],"
        "[{\"concat\":[\"10.96.0.2\",\"udp\",53]},{\"goto\":{\"target\":\"services\"}}]]}}},\n"
        // deletes carry keys only
        "{\"delete\":{\"element\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"name\":\"service-ips\",\"elem\":[{\"concat\":[\"10.96.0.1\",\"tcp\",80]}]}}}]}");
}

TEST_CASE("transaction JSON written in pieces is the JSON written whole") {
  Transaction t;
  t.addTable(Family::IPv4, "kube-proxy");
  t.addChain(Family::IPv4, "kube-proxy", "services", std::nullopt);
  t.addRule(Family::IPv4, "kube-proxy", "services", makeRule({st::jump("services")}, "why"));
  for (int i = 0; i < 300; ++i) {
    Expr key = ex::concat({ex::addr("10.96.1." + std::to_string(i % 250)), ex::symbol("tcp"), ex::number(80 + i)});
    t.addElement(Family::IPv4, "kube-proxy", verdictElement("service-ips", key, "services", "ns/s" + std::to_string(i)));
    if (i % 7 == 0) t.deleteElement(Family::IPv4, "kube-proxy", setElement("cluster-ips", ex::addr("10.96.2.1")));
  }
  const std::string whole = t.toJson();
  for (size_t pieceBytes : {size_t(1), size_t(100), size_t(4096), whole.size(), SIZE_MAX}) {
    CAPTURE(pieceBytes);
    std::string out = "c", joined;
    size_t pieces = 0;
    t.writeJson(out, pieceBytes, [&](std::string& piece) {
      CHECK(piece.size() >= pieceBytes);  // a piece is handed over only once it is big enough
      joined += piece;
      ++pieces;
    });
    joined += out;  // the last piece
    CHECK(joined == "c" + whole);
    if (pieceBytes == 1) CHECK(pieces > 300);  // one per command and per element
    if (pieceBytes >= whole.size()) CHECK(pieces == 0);
  }
}

namespace {
// One phase each: a table, `n` element adds, a chain delete; their text in the order given.
std::string textOf(std::initializer_list<const Transaction*> parts) {
  std::string out;
  for (const Transaction* p : parts) out += p->toText();
  return out;
}
void addSlots(Transaction& t, int n) {
  for (int i = 0; i < n; ++i)
    t.addElement(Family::IPv4, "kube-proxy", setElement("cluster-ips", ex::addr("10.96.0." + std::to_string(i + 1))));
}
}  // namespace

TEST_CASE("joined: the parts in order; the biggest one's buffer kept when it has room for all") {
  Transaction tables, adds, deletes;
  tables.addTable(Family::IPv4, "kube-proxy");
  tables.addTable(Family::IPv6, "kube-proxy");
  adds.reserve(16);
  addSlots(adds, 10);
  deletes.deleteChain(Family::IPv4, "kube-proxy", "old");
  const std::string want = textOf({&tables, &adds, &deletes});
  const Op* buffer = adds.ops().data();
  Transaction j = Transaction::joined({&tables, &adds, &deletes});
  CHECK(j.toText() == want);
  CHECK(j.size() == 13);
  CHECK(j.ops().data() == buffer);  // the 10 adds moved up in place, not into a new buffer
  CHECK(tables.empty());
  CHECK(adds.empty());
  CHECK(deletes.empty());
}

TEST_CASE("joined: without room in the biggest part, one new buffer and the same order") {
  Transaction tables, adds, deletes;
  tables.addTable(Family::IPv4, "kube-proxy");
  addSlots(adds, 4);
  adds.reserve(4);  // exactly full: no room for the other two
  deletes.deleteChain(Family::IPv4, "kube-proxy", "old");
  deletes.deleteChain(Family::IPv4, "kube-proxy", "older");
  REQUIRE(adds.capacity() < 7);
  const std::string want = textOf({&tables, &adds, &deletes});
  Transaction j = Transaction::joined({&tables, &adds, &deletes});
  CHECK(j.toText() == want);
  CHECK(j.size() == 7);
  Transaction none = Transaction::joined({&tables, &adds});
  CHECK(none.empty());
}

TEST_CASE("joined: a biggest part with far more room than the whole is not kept") {
  Transaction tables, adds;
  tables.addTable(Family::IPv4, "kube-proxy");
  adds.reserve(1000);  // reserved for a cold start; the kernel held nearly everything
  addSlots(adds, 3);
  const std::string want = textOf({&tables, &adds});
  const Op* buffer = adds.ops().data();
  Transaction j = Transaction::joined({&tables, &adds});
  CHECK(j.toText() == want);
  CHECK(j.ops().data() != buffer);
  CHECK(j.capacity() < 1000);
}

TEST_CASE("an operation stays small and still reads what it points at") {
  // ~550k operations in a cold sync at 50k services: 144 bytes each was ~80 MB of the daemon's peak.
  CHECK(sizeof(Op) <= 72);
  Transaction t;
  t.addChain(Family::IPv6, "kube-proxy", "nat-prerouting", Hook{"nat", "prerouting", -100});
  t.addChain(Family::IPv6, "kube-proxy", "services", std::nullopt);
  t.addSet(Family::IPv6, "kube-proxy", SetDecl{"cluster-ips", {"ipv6_addr"}, "", ""});
  t.addRule(Family::IPv6, "kube-proxy", "services", makeRule({st::jump("services")}, "why"));
  t.addElement(Family::IPv6, "kube-proxy", setElement("cluster-ips", ex::addr("fd00::1")));
  const auto& ops = t.ops();
  REQUIRE(ops.size() == 5);
  CHECK(ops[0].table.str() == "kube-proxy");
  CHECK((ops[0].hookValue() == Hook{"nat", "prerouting", -100}));
  CHECK_FALSE(ops[1].hookValue());
  CHECK(ops[2].set()->keyType == std::vector<std::string>{"ipv6_addr"});
  CHECK(ops[0].set() == nullptr);
  CHECK(ops[3].rule().comment == "why");
  CHECK(ops[4].element().key() == "\"fd00::1\"");
  CHECK(ops[4].name == "cluster-ips");
}

TEST_CASE("transaction text is native nft syntax") {
  Transaction t;
  t.addChain(Family::IPv6, "kube-proxy", "filter-output", Hook{"filter", "output", 0});
  t.addRule(Family::IPv6, "kube-proxy", "filter-output",
            makeRule({st::match(ex::ct("state"), "in", ex::symbol("new")), st::jump("x")}));
  t.addElement(Family::IPv6, "kube-proxy",
               mapElement("backends-tcp-3", ex::number(8), ex::concat({ex::addr("fd00::1"), ex::number(80)})));
  t.flushChain(Family::IPv6, "kube-proxy", "x");
  CHECK(t.toText() ==
        "add chain ip6 kube-proxy filter-output { type filter hook output priority 0 ; policy accept ; }\n"
        "add rule ip6 kube-proxy filter-output ct state new jump x\n"
        "add element ip6 kube-proxy backends-tcp-3 { 8 : fd00::1 . 80 }\n"
        "flush chain ip6 kube-proxy x\n");
}

TEST_CASE("comments from the cluster cannot break out of nft text quoting") {
  Transaction t;
  t.addRule(Family::IPv4, "kube-proxy", "c", makeRule({st::drop()}, "a\" ; flush ruleset ; \""));
  CHECK(t.toText() == "add rule ip kube-proxy c drop comment \"a_ ; flush ruleset ; _\"\n");
  CHECK(t.toJson().find("\"comment\":\"a\\\" ; flush ruleset ; \\\"\"") != std::string::npos);
}

TEST_CASE("rule JSON matches what nft lists for the same rule") {
  // Taken from `nft -j list table` of rules loaded from text (nft 1.0.6).
  Rule dnat = makeRule({st::match(ex::meta("l4proto"), "==", ex::symbol("tcp")),
                        st::dnatMap(Family::IPv4, ex::numgenRandom(2, 4), "backends-0")});
  CHECK(dnat.exprJson ==
        "[{\"match\":{\"op\":\"==\",\"left\":{\"meta\":{\"key\":\"l4proto\"}},\"right\":\"tcp\"}},"
        "{\"dnat\":{\"family\":\"ip\",\"addr\":{\"map\":{\"key\":{\"numgen\":{\"mode\":\"random\",\"mod\":2,\"offset\":4}},\"data\":\"@backends-0\"}}}}]");
  CHECK(dnat.setRefs == std::vector<std::string>{"backends-0"});
  Rule mark = makeRule({st::match(ex::bitAnd(ex::meta("mark"), 0x4000), "==", ex::number(0x4000)),
                        st::markSet(ex::bitXor(ex::meta("mark"), 0x4000)), st::masqueradeFullyRandom()});
  CHECK(mark.exprJson ==
        "[{\"match\":{\"op\":\"==\",\"left\":{\"&\":[{\"meta\":{\"key\":\"mark\"}},16384]},\"right\":16384}},"
        "{\"mangle\":{\"key\":{\"meta\":{\"key\":\"mark\"}},\"value\":{\"^\":[{\"meta\":{\"key\":\"mark\"}},16384]}}},"
        "{\"masquerade\":{\"flags\":\"fully-random\"}}]");
  CHECK(mark.text == "meta mark & 0x00004000 == 16384 meta mark set meta mark ^ 0x00004000 masquerade fully-random");
}

TEST_CASE("element text from JSON is exactly what the builders write") {
  std::vector<Expr> forms = {
      ex::addr("10.96.0.1"),
      ex::addr("fd00:10:96::1"),
      ex::addr("::ffff:1.2.3.4"),
      ex::symbol("tcp"),
      ex::symbol("udp"),
      ex::symbol("sctp"),
      ex::number(0),
      ex::number(65535),
      ex::number(-7),
      ex::number(4294967295LL),
      ex::prefix("10.0.0.0", 8),
      ex::prefix("fd00::", 64),
      ex::concat({}),
      ex::concat({ex::addr("10.96.0.1"), ex::symbol("tcp"), ex::number(80)}),
      ex::concat({ex::addr("fd00::1"), ex::symbol("sctp"), ex::number(9)}),
      ex::concat({ex::symbol("udp"), ex::number(30080)}),
      ex::concat({ex::addr("10.244.1.2"), ex::addr("10.244.1.2")}),
      ex::concat({ex::addr("fd00::5"), ex::number(8080)}),
      ex::concat({ex::addr("1.2.3.4")}),
      gotoVerdict("service-4AB2JSGQ-ns/web:http"),
      gotoVerdict("external-X/y:p"),
      gotoVerdict("reject-chain"),
      Expr{"{\"drop\":null}", "drop"},
      ex::symbol("odd \"quoted\" \\ name\n\x01"),
  };
  for (const Expr& e : forms) {
    INFO(e.json);
    CHECK(exprText(e.json) == e.text);
  }
  // Forms elements never use come back as their JSON.
  CHECK(exprText(ex::meta("mark").json) == ex::meta("mark").json);
  CHECK(exprText("{\"concat\":[1,") == "{\"concat\":[1,");
  CHECK(exprText("\"unterminated") == "\"unterminated");
  CHECK(exprText("12x") == "12x");
  CHECK(exprText("") == "");
  CHECK(verdictTarget(gotoVerdict("services").json) == "services");
  CHECK(verdictTarget("{\"drop\":null}") == "");
  CHECK(verdictTarget("") == "");
  CHECK(verdictElement("m", ex::addr("1.2.3.4"), "c").chainRefs() == std::vector<std::string>{"c"});
  CHECK(setElement("s", ex::addr("1.2.3.4")).chainRefs().empty());
}

TEST_CASE("set names are shared, compare by name and read as strings") {
  std::string built = std::string("backends-") + "tcp-7";
  SetName a("backends-tcp-7"), b(built), c("backends-tcp-8"), none;
  CHECK(a == b);
  CHECK(a != c);
  CHECK(&a.str() == &b.str());
  CHECK(a.str() == "backends-tcp-7");
  CHECK(none.str().empty());
  const std::string& asString = c;
  CHECK(asString == "backends-tcp-8");
  Element e = setElement(built, ex::addr("1.2.3.4"));
  CHECK(e.set == a);
  CHECK(e == setElement("backends-tcp-7", ex::addr("1.2.3.4")));
  CHECK(!(e == setElement("backends-tcp-8", ex::addr("1.2.3.4"))));
}

TEST_CASE("flush set / flush map: a map stays a map, in JSON and in text") {
  Transaction t;
  t.flushSet(Family::IPv4, "kube-proxy", SetDecl{"cluster-ips", {"ipv4_addr"}, "", ""});
  t.flushSet(Family::IPv6, "kube-proxy", SetDecl{"backends-tcp-0", {"integer"}, "ipv6_addr . inet_service", ""});
  CHECK(t.toJson() ==
        "{\"nftables\":[{\"flush\":{\"set\":{\"family\":\"ip\",\"table\":\"kube-proxy\",\"name\":\"cluster-ips\"}}},\n"
        "{\"flush\":{\"map\":{\"family\":\"ip6\",\"table\":\"kube-proxy\",\"name\":\"backends-tcp-0\"}}}]}");
  CHECK(t.toText() == "flush set ip kube-proxy cluster-ips\nflush map ip6 kube-proxy backends-tcp-0\n");
}

// nft 1.0.6 lists numgen's 32-bit offset as a signed number. An affinity scope or port:slot above
// 2^31 (a ClusterIP in 172.16/12, a port above 32767) was sent unsigned: the rule never matched its
// own listing (rewritten at each restart) and a trace of the live table read the offset as 0.
TEST_CASE("numgen offsets above 2^31 are written as nft lists them, and read in either form") {
  CHECK(ex::numgenRandom(1, 3370014487u).json == R"({"numgen":{"mode":"random","mod":1,"offset":-924952809}})");
  CHECK(ex::numgenRandom(1, 3370014487u).text == "numgen random mod 1 offset 3370014487");
  CHECK(ex::numgenRandom(2, 4).json == R"({"numgen":{"mode":"random","mod":2,"offset":4}})");
  CHECK(ruleTextFromJson(R"([{"match":{"op":"==","left":{"numgen":{"mode":"random","mod":1,"offset":-924952809}},"right":5}}])") ==
        "numgen random mod 1 offset 3370014487 5");
  CHECK(ruleTextFromJson(R"([{"match":{"op":"==","left":{"numgen":{"mode":"random","mod":1,"offset":3370014487}},"right":5}}])") ==
        "numgen random mod 1 offset 3370014487 5");
}
