// The packet evaluator on small hand-written tables: rules are written as the JSON nft lists, so
// these tests pin down the interpreter, not our render code.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "nft/eval/evaluator.h"
#include "nft/listing.h"

using namespace kpn;
using namespace kpn::nft::eval;

namespace {

struct Tables {
  EvalTable t;
  explicit Tables(nft::Family f = nft::Family::IPv4) {
    t.family = f;
    t.name = "test";
  }
  Tables& base(const std::string& name, const std::string& type, const std::string& hook, int prio,
               std::vector<std::string> rules) {
    chain(name, std::move(rules));
    t.chains[name].hook = nft::Hook{type, hook, prio};
    return *this;
  }
  Tables& chain(const std::string& name, std::vector<std::string> rules) {
    auto& c = t.chains[name];  // replaces the chain's rules, keeps its hook
    c.name = name;
    c.rules.clear();
    for (auto& r : rules) c.rules.push_back({std::move(r), "", ""});
    return *this;
  }
  Tables& set(const std::string& name, std::vector<std::pair<std::string, std::string>> elements) {
    t.sets[name].elements = std::move(elements);
    return *this;
  }
  Trace run(const Packet& p, const Environment& env) const { return evaluate({t}, p, env); }
};

Environment env() {
  Environment e;
  e.localAddresses = {"192.168.0.2", "2001:db8::2"};
  e.masqueradeSource[0] = "192.168.0.2";
  e.masqueradeSource[1] = "2001:db8::2";
  return e;
}

Packet tcp(const std::string& from, const std::string& to, uint16_t port, Entry entry = Entry::Prerouting,
           const std::string& iif = "eth0") {
  Packet p;
  p.family = from.find(':') == std::string::npos ? nft::Family::IPv4 : nft::Family::IPv6;
  p.saddr = from;
  p.daddr = to;
  p.dport = port;
  p.entry = entry;
  p.iifname = entry == Entry::Output ? "" : iif;
  return p;
}

const char* kDaddr = R"({"payload":{"protocol":"ip","field":"daddr"}})";
const char* kSaddr = R"({"payload":{"protocol":"ip","field":"saddr"}})";
const char* kDport = R"({"payload":{"protocol":"th","field":"dport"}})";
const char* kMark = R"({"meta":{"key":"mark"}})";

std::string match(const std::string& left, const std::string& op, const std::string& right) {
  return R"({"match":{"op":")" + op + R"(","left":)" + left + R"(,"right":)" + right + "}}";
}
std::string rule(std::vector<std::string> stmts) {
  std::string out = "[";
  for (size_t i = 0; i < stmts.size(); ++i) out += (i ? "," : "") + stmts[i];
  return out + "]";
}
std::string jump(const std::string& c) { return R"({"jump":{"target":")" + c + R"("}})"; }
std::string markOr(uint32_t bit) {
  return R"({"mangle":{"key":{"meta":{"key":"mark"}},"value":{"|":[{"meta":{"key":"mark"}},)" + std::to_string(bit) + "]}}}";
}
const char* kMasq = R"({"masquerade":{"flags":"fully-random"}})";
const char* kDrop = R"({"drop":null})";
const char* kReject = R"({"reject":{"type":"icmp","expr":"port-unreachable"}})";
std::string dnatMap(const std::string& key, const std::string& map) {
  return R"({"dnat":{"family":"ip","addr":{"map":{"key":)" + key + R"(,"data":"@)" + map + R"("}}}})";
}
std::string numgen(int mod, int offset = 0, const char* mode = "random") {
  return std::string(R"({"numgen":{"mode":")") + mode + R"(","mod":)" + std::to_string(mod) + R"(,"offset":)" +
         std::to_string(offset) + "}}";
}
std::string ep(const std::string& ip, int port) { return R"({"concat":[")" + ip + R"(",)" + std::to_string(port) + "]}"; }

// A small service table in the shape ours has: dispatch by vmap, numgen over a backends map,
// masquerade by mark, and a filter check after DNAT.
Tables serviceTable() {
  Tables t;
  t.base("nat-prerouting", "nat", "prerouting", -100, {rule({jump("services")})})
      .base("nat-output", "nat", "output", -100, {rule({jump("services")})})
      .base("nat-postrouting", "nat", "postrouting", 100,
            {rule({match(R"({"&":[{"meta":{"key":"mark"}},16384]})", "==", "16384"), kMasq})})
      .base("filter-forward", "filter", "forward", 0,
            {rule({match(R"({"ct":{"key":"state"}})", "in", R"("new")"), match(kDaddr, "==", R"({"prefix":{"addr":"10.96.0.0","len":16}})"), kReject})})
      .chain("services", {rule({match(kSaddr, "!=", R"({"prefix":{"addr":"10.244.0.0","len":16}})"), markOr(0x4000)}),
                          rule({R"({"vmap":{"key":{"concat":[)" + std::string(kDaddr) + R"(,{"meta":{"key":"l4proto"}},)" + kDport +
                                R"(]},"data":"@service-ips"}})"})})
      .chain("svc-web", {rule({dnatMap(numgen(2, 4), "backends")})})
      .set("service-ips", {{R"({"concat":["10.96.0.10","tcp",80]})", R"({"goto":{"target":"svc-web"}})"}})
      .set("backends", {{"4", ep("10.244.1.2", 8080)}, {"5", ep("10.244.2.3", 8080)}});
  return t;
}

}  // namespace

TEST_CASE("evaluator: a ClusterIP from a pod is DNATed to each endpoint with probability 1/N, source kept") {
  auto t = serviceTable().run(tcp("10.244.1.9", "10.96.0.10", 80, Entry::Prerouting, "veth1"), env());
  CHECK(t.verdict == Verdict::Dnat);
  REQUIRE(t.candidates.size() == 2);
  CHECK(t.candidates[0].address == "10.244.1.2");
  CHECK(t.candidates[0].port == 8080);
  CHECK(t.candidates[0].probability == doctest::Approx(0.5));
  CHECK(t.candidates[0].selection == Selection::Random);
  CHECK(t.candidates[0].sourceSeen == "10.244.1.9");
  CHECK_FALSE(t.candidates[0].masquerade);
  CHECK(t.candidates[1].address == "10.244.2.3");
  // The path names the chains it went through, in netfilter's order.
  std::vector<std::string> chains;
  for (const auto& s : t.candidates[0].path) chains.push_back(s.chain);
  CHECK(chains == std::vector<std::string>{"nat-prerouting", "services", "svc-web", ""});  // "": routing
}

TEST_CASE("evaluator: from the node (output) the mark set before DNAT masquerades in postrouting") {
  auto t = serviceTable().run(tcp("192.168.0.2", "10.96.0.10", 80, Entry::Output), env());
  REQUIRE(t.candidates.size() == 2);
  for (const auto& c : t.candidates) {
    CHECK(c.masquerade);
    CHECK(c.sourceSeen == "192.168.0.2");
    CHECK(c.verdict == Verdict::Accept);
  }
}

TEST_CASE("evaluator: an unknown port falls through to the filter check after routing; other addresses pass") {
  auto tables = serviceTable();
  auto t = tables.run(tcp("10.244.1.9", "10.96.0.10", 81), env());
  CHECK(t.verdict == Verdict::Reject);
  REQUIRE(t.candidates.size() == 1);
  CHECK(t.candidates[0].probability == doctest::Approx(1.0));
  CHECK(t.reason.find("filter-forward") != std::string::npos);
  // Not a service address: untouched.
  t = tables.run(tcp("10.244.1.9", "10.1.2.3", 80), env());
  CHECK(t.verdict == Verdict::Accept);
  REQUIRE(t.candidates.size() == 1);
  CHECK_FALSE(t.candidates[0].translated);
  CHECK(t.candidates[0].address == "10.1.2.3");
}

TEST_CASE("evaluator: a slot without an element ends that rule (the kernel's lookup miss), and that is reported") {
  auto tables = serviceTable();
  tables.chain("svc-web", {rule({dnatMap(numgen(3, 4), "backends")}), rule({kDrop})});
  auto t = tables.run(tcp("10.244.1.9", "10.96.0.10", 80), env());
  CHECK(t.verdict == Verdict::Dnat);
  REQUIRE(t.candidates.size() == 3);
  const Candidate* missing = nullptr;
  for (const auto& c : t.candidates) {
    CHECK(c.probability == doctest::Approx(1.0 / 3));
    if (!c.translated) missing = &c;
  }
  REQUIRE(missing != nullptr);
  CHECK(missing->verdict == Verdict::Drop);
  REQUIRE(missing->notes.size() == 1);
  CHECK(missing->notes[0].find("no element 6 in @backends") != std::string::npos);
}

TEST_CASE("evaluator: numgen anywhere in a concatenated key; numgen inc and jhash are reported as such") {
  auto tables = serviceTable();
  std::string key = R"({"concat":[)" + std::string(kDaddr) + R"(,{"payload":{"protocol":"tcp","field":"dport"}},)" + numgen(2) + "]}";
  tables.chain("svc-web", {rule({dnatMap(key, "shared")})})
      .set("shared", {{R"({"concat":["10.96.0.10",80,0]})", ep("10.244.1.2", 8080)},
                      {R"({"concat":["10.96.0.10",80,1]})", ep("10.244.2.3", 8080)},
                      {R"({"concat":["10.96.0.11",80,0]})", ep("10.244.9.9", 8080)}});
  auto t = tables.run(tcp("10.244.1.9", "10.96.0.10", 80), env());
  REQUIRE(t.candidates.size() == 2);
  CHECK(t.candidates[0].address == "10.244.1.2");
  CHECK(t.candidates[1].address == "10.244.2.3");

  tables.chain("svc-web", {rule({dnatMap(numgen(2, 4, "inc"), "backends")})});
  t = tables.run(tcp("10.244.1.9", "10.96.0.10", 80), env());
  REQUIRE(t.candidates.size() == 2);
  CHECK(t.candidates[0].selection == Selection::RoundRobin);

  tables.chain("svc-web", {rule({dnatMap(R"({"jhash":{"mod":2,"offset":4,"expr":)" + std::string(kSaddr) + "}}", "backends")})});
  t = tables.run(tcp("10.244.1.9", "10.96.0.10", 80), env());
  REQUIRE(t.candidates.size() == 2);
  CHECK(t.candidates[1].selection == Selection::Hash);
  CHECK(t.candidates[1].probability == doctest::Approx(0.5));
}

TEST_CASE("evaluator: anonymous verdict maps with prefixes and ranges; jump returns, goto does not") {
  Tables t;
  t.base("pre", "filter", "prerouting", -110,
         {rule({R"({"vmap":{"key":)" + std::string(kSaddr) + R"(,"data":{"set":[[{"prefix":{"addr":"10.0.0.0","len":8}},{"jump":{"target":"jumped"}}],)"
                R"([{"range":["192.0.2.1","192.0.2.9"]},{"goto":{"target":"gone"}}]]}}})"}),
          rule({markOr(1)})})
      .chain("jumped", {rule({markOr(2)}), rule({R"({"return":null})"}), rule({kDrop})})
      .chain("gone", {rule({markOr(4)})})
      .base("post", "filter", "forward", 0, {rule({match(kMark, "==", "3"), kDrop}), rule({match(kMark, "==", "4"), kReject})});
  // jump: back in the base chain after the return, mark 2|1 = 3 → dropped in forward.
  CHECK(t.run(tcp("10.1.1.1", "198.51.100.1", 80), env()).verdict == Verdict::Drop);
  // goto: the end of "gone" returns from the base chain, so mark stays 4 → rejected.
  CHECK(t.run(tcp("192.0.2.5", "198.51.100.1", 80), env()).verdict == Verdict::Reject);
  // Neither: mark 1, accepted.
  CHECK(t.run(tcp("192.0.2.10", "198.51.100.1", 80), env()).verdict == Verdict::Accept);
}

TEST_CASE("evaluator: the routing decision after prerouting, and loopback for the node's own local traffic") {
  Tables t;
  t.base("in", "filter", "input", 0, {rule({R"({"counter":null})", kReject})})
      .base("fwd", "filter", "forward", 0, {rule({kDrop})});
  CHECK(t.run(tcp("198.51.100.7", "192.168.0.2", 80), env()).verdict == Verdict::Reject);  // local: input
  CHECK(t.run(tcp("198.51.100.7", "10.244.1.2", 80), env()).verdict == Verdict::Drop);     // forwarded
  CHECK(t.run(tcp("192.168.0.2", "10.244.1.2", 80, Entry::Output), env()).verdict == Verdict::Accept);
  CHECK(t.run(tcp("192.168.0.2", "127.0.0.1", 80, Entry::Output), env()).verdict == Verdict::Reject);  // via lo
}

TEST_CASE("evaluator: ct status dnat, fib type local, interface wildcards, protocol fields of other protocols") {
  Tables t;
  t.base("pre", "nat", "prerouting", -100,
         {rule({match(R"({"meta":{"key":"iifname"}})", "==", R"("veth*")"), markOr(1)}),
          rule({match(R"({"payload":{"protocol":"udp","field":"dport"}})", "==", "80"), markOr(2)}),
          rule({match(R"({"fib":{"result":"type","flags":["daddr"]}})", "==", R"("local")"),
                R"({"dnat":{"family":"ip","addr":"10.244.1.2","port":8080}})"})})
      .base("post", "nat", "postrouting", 100,
            {rule({match(R"({"ct":{"key":"status"}})", "in", R"("dnat")"), match(kMark, "==", "1"), kMasq})});
  auto r = t.run(tcp("10.244.3.3", "192.168.0.2", 80, Entry::Prerouting, "veth9"), env());
  REQUIRE(r.candidates.size() == 1);
  CHECK(r.candidates[0].translated);
  CHECK(r.candidates[0].address == "10.244.1.2");
  CHECK(r.candidates[0].port == 8080);
  CHECK(r.candidates[0].masquerade);  // veth* matched, the udp rule did not (mark 1, not 3)
  r = t.run(tcp("10.244.3.3", "192.168.0.2", 80, Entry::Prerouting, "eth0"), env());
  CHECK_FALSE(r.candidates[0].masquerade);
  r = t.run(tcp("10.244.3.3", "192.168.0.9", 80, Entry::Prerouting, "veth9"), env());  // not local: no dnat
  CHECK(r.verdict == Verdict::Accept);
  CHECK_FALSE(r.candidates[0].translated);
  CHECK_FALSE(r.candidates[0].masquerade);  // ct status dnat is false
}

TEST_CASE("evaluator: nat chains of one hook run until one translated; tables of the other family are skipped") {
  Tables t;
  t.base("first", "nat", "prerouting", -100, {rule({R"({"dnat":{"family":"ip","addr":"10.0.0.1"}})"})})
      .base("second", "nat", "prerouting", -90, {rule({R"({"dnat":{"family":"ip","addr":"10.0.0.2"}})"})});
  auto r = t.run(tcp("198.51.100.7", "203.0.113.1", 80), env());
  REQUIRE(r.candidates.size() == 1);
  CHECK(r.candidates[0].address == "10.0.0.1");
  CHECK(r.candidates[0].port == 80);
  r = t.run(tcp("2001:db8::9", "2001:db8::10", 80), env());
  CHECK(r.verdict == Verdict::Accept);
  CHECK_FALSE(r.candidates[0].translated);
}

TEST_CASE("evaluator: what it does not know is reported, never passed") {
  Tables t;
  t.base("pre", "filter", "prerouting", 0, {rule({R"({"limit":{"rate":10,"per":"second"}})", kDrop})});
  auto r = t.run(tcp("198.51.100.7", "203.0.113.1", 80), env());
  CHECK(r.verdict == Verdict::Unsupported);
  CHECK(r.reason.find("statement \"limit\"") != std::string::npos);
  t.chain("pre", {rule({match(R"({"osf":{"key":"name"}})", "==", R"("Linux")")})});
  r = t.run(tcp("198.51.100.7", "203.0.113.1", 80), env());
  CHECK(r.verdict == Verdict::Unsupported);
  CHECK(r.reason.find("expression \"osf\"") != std::string::npos);
  t.chain("pre", {rule({jump("nowhere")})});
  CHECK(t.run(tcp("198.51.100.7", "203.0.113.1", 80), env()).verdict == Verdict::Unsupported);
}

TEST_CASE("evaluator: a table parsed from nft's JSON listing traces like the model") {
  std::string listing = R"({"nftables":[{"metainfo":{"json_schema_version":1}},
    {"table":{"family":"ip","name":"kp","handle":1}},
    {"chain":{"family":"ip","table":"kp","name":"pre","handle":1,"type":"nat","hook":"prerouting","prio":-100,"policy":"accept"}},
    {"chain":{"family":"ip","table":"kp","name":"pick","handle":2}},
    {"map":{"family":"ip","name":"dispatch","table":"kp","type":["ipv4_addr","inet_proto","inet_service"],"handle":3,"map":"verdict",
      "elem":[[{"concat":["10.96.0.10","tcp",80]},{"goto":{"target":"pick"}}]]}},
    {"map":{"family":"ip","name":"eps","table":"kp","type":"integer","handle":4,"map":["ipv4_addr","inet_service"],
      "elem":[[{"elem":{"val":0,"comment":"a"}},{"concat":["10.244.1.2",8080]}],[1,{"concat":["10.244.2.3",8080]}]]}},
    {"rule":{"family":"ip","table":"kp","chain":"pre","handle":5,"expr":[{"vmap":{"key":{"concat":[{"payload":{"protocol":"ip","field":"daddr"}},{"meta":{"key":"l4proto"}},{"payload":{"protocol":"th","field":"dport"}}]},"data":"@dispatch"}}]}},
    {"rule":{"family":"ip","table":"kp","chain":"pick","handle":6,"expr":[{"counter":{"packets":0,"bytes":0}},{"dnat":{"family":"ip","addr":{"map":{"key":{"numgen":{"mode":"random","mod":2,"offset":0}},"data":"@eps"}}}}]}}
  ]})";
  std::string err;
  auto listed = nft::parseListing(listing, &err);
  REQUIRE_MESSAGE(listed, err);
  auto r = evaluate({tableFromListing(nft::Family::IPv4, "kp", *listed)}, tcp("10.244.1.9", "10.96.0.10", 80), env());
  CHECK(r.verdict == Verdict::Dnat);
  REQUIRE(r.candidates.size() == 2);
  CHECK(r.candidates[0].address == "10.244.1.2");
  CHECK(r.candidates[1].address == "10.244.2.3");
  std::string text = traceText(r);
  CHECK(text.rfind("ip tcp 10.244.1.9:40000 → 10.96.0.10:80, in on eth0\ndnat: DNAT to 2 candidate(s)\n", 0) == 0);
  CHECK(text.find("50% (random) accept → 10.244.1.2:8080, source seen 10.244.1.9") != std::string::npos);
}

TEST_CASE("evaluator: iif and oif need a device; the node's own packets have no input interface") {
  Tables t;
  t.base("out", "filter", "output", 0,
         {rule({match(R"({"meta":{"key":"iif"}})", "==", R"("eth0")"), kDrop}),
          rule({match(R"({"meta":{"key":"iifname"}})", "==", R"("")"), match(R"({"meta":{"key":"oifname"}})", "==", R"("cni0")"), kReject})})
      .base("fwd", "filter", "forward", 0, {rule({match(R"({"meta":{"key":"oif"}})", "==", R"("eth0")"), kDrop})});
  Environment e = env();
  e.routes = {{"10.244.1.0/24", "cni0"}};
  CHECK(t.run(tcp("192.168.0.2", "10.244.1.2", 80, Entry::Output), e).verdict == Verdict::Reject);  // no iif: rule 1 ends
  CHECK(t.run(tcp("192.168.0.2", "10.244.2.2", 80, Entry::Output), e).verdict == Verdict::Accept);  // oifname eth0
  CHECK(t.run(tcp("198.51.100.7", "10.244.2.2", 80), e).verdict == Verdict::Drop);                  // forwarded via eth0
  CHECK(t.run(tcp("198.51.100.7", "10.244.1.2", 80), e).verdict == Verdict::Accept);                // via cni0
}

TEST_CASE("evaluator: a named set mixes hashed literal keys and scanned intervals; the first matching element wins") {
  Tables t;
  t.base("pre", "filter", "prerouting", 0,
         {rule({R"({"vmap":{"key":{"concat":[)" + std::string(kSaddr) + R"(,{"meta":{"key":"l4proto"}}]},"data":"@by-source"}})"})})
      .set("by-source", {{R"({"concat":[{"prefix":{"addr":"10.1.0.0","len":16}},"tcp"]})", R"({"drop":null})"},
                         {R"({"concat":["10.1.1.1","tcp"]})", R"({"accept":null})"},
                         {R"({"concat":["10.2.2.2",6]})", R"({"goto":{"target":"refuse"}})"},
                         {R"({"concat":[{"range":["10.3.0.1","10.3.0.9"]},"udp"]})", R"({"drop":null})"}})
      .chain("refuse", {rule({kReject})});
  CHECK(t.run(tcp("10.1.1.1", "10.9.9.9", 80), env()).verdict == Verdict::Drop);  // the prefix comes first
  CHECK(t.run(tcp("10.2.2.2", "10.9.9.9", 80), env()).verdict == Verdict::Reject);  // 6 is tcp
  CHECK(t.run(tcp("10.3.0.5", "10.9.9.9", 80), env()).verdict == Verdict::Accept);  // the range is udp only
  Packet udp = tcp("10.3.0.5", "10.9.9.9", 53);
  udp.protocol = "udp";
  CHECK(t.run(udp, env()).verdict == Verdict::Drop);
  // One evaluator, many packets: the same answers.
  Evaluator ev(std::vector<EvalTable>{t.t});
  CHECK(ev.trace(tcp("10.2.2.2", "10.9.9.9", 80), env()).verdict == Verdict::Reject);
  CHECK(ev.trace(udp, env()).verdict == Verdict::Drop);
}

TEST_CASE("evaluator: an entry the data path put in a listed dynamic set is found, with its seconds left") {
  std::string listing = R"({"nftables":[{"metainfo":{"json_schema_version":1}},
    {"table":{"family":"ip","name":"kp","handle":1}},
    {"chain":{"family":"ip","table":"kp","name":"pre","handle":1,"type":"nat","hook":"prerouting","prio":-100,"policy":"accept"}},
    {"chain":{"family":"ip","table":"kp","name":"stuck","handle":2}},
    {"set":{"family":"ip","name":"sticky","table":"kp","type":"ipv4_addr","handle":3,"flags":["timeout","dynamic"],
      "elem":[{"elem":{"val":"10.244.1.9","timeout":60,"expires":42}}]}},
    {"rule":{"family":"ip","table":"kp","chain":"pre","handle":4,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"saddr"}},"right":"@sticky"}},{"goto":{"target":"stuck"}}]}},
    {"rule":{"family":"ip","table":"kp","chain":"stuck","handle":5,"expr":[{"dnat":{"family":"ip","addr":"10.244.2.3","port":8080}}]}}
  ]})";
  std::string err;
  auto listed = nft::parseListing(listing, &err);
  REQUIRE_MESSAGE(listed, err);
  CHECK(listed->sets["sticky"].expires.at(R"("10.244.1.9")") == 42);
  auto table = tableFromListing(nft::Family::IPv4, "kp", *listed);
  auto held = evaluate({table}, tcp("10.244.1.9", "10.96.0.10", 80), env());
  REQUIRE(held.candidates.size() == 1);
  CHECK(held.candidates[0].address == "10.244.2.3");
  std::optional<uint64_t> left;
  for (const auto& s : held.candidates[0].path)
    for (const auto& l : s.lookups)
      if (l.set == "sticky") left = l.expiresIn;
  CHECK(left == std::optional<uint64_t>(42));
  // Another client holds nothing: untouched.
  auto other = evaluate({table}, tcp("10.244.1.8", "10.96.0.10", 80), env());
  REQUIRE(other.candidates.size() == 1);
  CHECK_FALSE(other.candidates[0].translated);
}
