// Upstream kube-proxy's iptables-mode leftovers: which chains are upstream's, and the one
// transaction that removes them and the jumps to them from real iptables-nft listings
// (unit/golden/iptables-nft-*.json: e2e/upstream_iptables.py's rules loaded by iptables-nft-restore
// 1.8.9, listed by nft 1.0.6), touching nothing else.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "pkg/iptables/iptables_leftovers.h"

using namespace kpn::iptables;

namespace {

std::string golden(const char* name) {
  std::ifstream in(std::string("unit/golden/") + name);
  REQUIRE_MESSAGE(in.good(), "missing unit/golden/" << name << " (run the unit tests from the repository root)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> commandsOf(const IptablesCleanupPlan& plan) {
  IptablesCleanupCommands c = cleanupCommands(plan);
  std::vector<std::string> out = c.ruleDeletes;
  out.insert(out.end(), c.chainFlushes.begin(), c.chainFlushes.end());
  out.insert(out.end(), c.chainDeletes.begin(), c.chainDeletes.end());
  return out;
}

// The plan's commands by verb and kind: "delete rule" -> ["FORWARD#18", ...], "flush chain" -> names.
std::map<std::string, std::vector<std::string>> byVerb(const IptablesCleanupPlan& plan) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& c : commandsOf(plan)) {
    rapidjson::Document d;
    d.Parse(c.c_str());
    REQUIRE_FALSE(d.HasParseError());
    const auto& verb = *d.MemberBegin();
    const auto& kind = *verb.value.MemberBegin();
    std::string key = std::string(verb.name.GetString()) + " " + kind.name.GetString();
    const auto& o = kind.value;
    CHECK(std::string(o["family"].GetString()) == "ip");
    if (o.HasMember("handle"))
      out[key].push_back(std::string(o["chain"].GetString()) + "#" + std::to_string(o["handle"].GetInt64()));
    else
      out[key].push_back(o["name"].GetString());
  }
  return out;
}

}  // namespace

TEST_CASE("iptables leftovers: upstream's chains are the proxier's, never the kubelet's or anyone else's") {
  for (const char* c : {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
                        "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", "KUBE-SVC-CDGGSHYLG3RE2FKL",
                        "KUBE-SVL-CDGGSHYLG3RE2FKL", "KUBE-SEP-QZSIC2ZS53EHPBVZ", "KUBE-FW-CDGGSHYLG3RE2FKL",
                        "KUBE-EXT-CDGGSHYLG3RE2FKL", "KUBE-XLB-CDGGSHYLG3RE2FKL"})
    CHECK_MESSAGE(isUpstreamIptablesChain(c), c);
  for (const char* c : {"KUBE-KUBELET-CANARY", "KUBE-FIREWALL", "KUBE-MARK-DROP", "KUBE-SVC-", "KUBE-SERVICES-X",
                        "kube-services", "INPUT", "USER-AUDIT", "cali-INPUT", "KUBE-ROUTER-INPUT"})
    CHECK_FALSE_MESSAGE(isUpstreamIptablesChain(c), c);
}

TEST_CASE("iptables leftovers: filter table: the jumps from the built-in chains, then upstream's chains; the rest stays") {
  IptablesCleanupPlan plan;
  std::string error;
  REQUIRE(addIptablesListing(golden("iptables-nft-filter.json"), &plan, &error));
  auto v = byVerb(plan);
  // INPUT 16 (KUBE-FIREWALL, the kubelet's) and 17 (the user's USER-AUDIT) stay, as do OUTPUT 24.
  CHECK(v["delete rule"] == std::vector<std::string>{"INPUT#13", "INPUT#14", "INPUT#15", "FORWARD#18", "FORWARD#19",
                                                     "FORWARD#20", "FORWARD#21", "OUTPUT#22", "OUTPUT#23"});
  std::vector<std::string> chains{"KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD",        "KUBE-NODEPORTS",
                                  "KUBE-PROXY-CANARY",      "KUBE-PROXY-FIREWALL", "KUBE-SERVICES"};
  CHECK(v["flush chain"] == chains);
  CHECK(v["delete chain"] == chains);
  CHECK(plan.jumpRules == 9);
  CHECK(plan.upstreamChains.front().name == "KUBE-EXTERNAL-SERVICES");
  CHECK(plan.upstreamChains.front().table == "filter");
  // The chains to look into for jumps: the built-in ones, the kubelet's, the user's.
  std::vector<std::string> others;
  for (const auto& c : plan.otherChains) others.push_back(c.name);
  CHECK(others == std::vector<std::string>{"INPUT", "FORWARD", "OUTPUT", "KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "USER-AUDIT"});
  // Order in the transaction: no chain is deleted while a rule may still jump to it.
  rapidjson::Document d;
  std::string txn = cleanupTransactionJson(plan);
  d.Parse(txn.c_str());
  REQUIRE_FALSE(d.HasParseError());
  const auto& cmds = d["nftables"];
  REQUIRE(cmds.Size() == 9 + 6 + 6);
  for (rapidjson::SizeType i = 0; i < cmds.Size(); ++i) {
    const char* expect = i < 9 ? "delete" : i < 15 ? "flush" : "delete";
    CHECK(cmds[i].HasMember(expect));
    CHECK(cmds[i][expect].HasMember(i < 9 ? "rule" : "chain"));
  }
}

TEST_CASE("iptables leftovers: nat table: three jumps go, the user's MASQUERADE rule and the kubelet's canary stay") {
  IptablesCleanupPlan plan;
  std::string error;
  REQUIRE(addIptablesListing(golden("iptables-nft-nat.json"), &plan, &error));
  auto v = byVerb(plan);
  CHECK(v["delete rule"] == std::vector<std::string>{"PREROUTING#14", "OUTPUT#15", "POSTROUTING#16"});
  auto& chains = v["delete chain"];
  CHECK(chains.size() == 8);  // MARK-MASQ, NODEPORTS, POSTROUTING, PROXY-CANARY, SERVICES, web:http's SVC and 2 SEPs
  for (const auto& c : chains) CHECK_MESSAGE(isUpstreamIptablesChain(c), c);
  CHECK(std::find(chains.begin(), chains.end(), "KUBE-KUBELET-CANARY") == chains.end());

  // Two tables add up in one plan, and the transaction is one JSON document.
  REQUIRE(addIptablesListing(golden("iptables-nft-filter.json"), &plan, &error));
  CHECK(plan.jumpRules == 12);
  CHECK(plan.upstreamChains.size() == 8 + 6);
  CHECK(plan.otherChains.size() == 5 + 6);
  // Listing a chain again (its own `list chain` after `list chains`) adds nothing twice.
  REQUIRE(addIptablesListing(golden("iptables-nft-filter.json"), &plan, &error));
  CHECK(plan.upstreamChains.size() == 8 + 6);
  CHECK(plan.otherChains.size() == 5 + 6);
  CHECK(plan.jumpRules == 12);
  CHECK(plan.ruleDeletes.size() == 12);
}

TEST_CASE("iptables leftovers: `list chains` of a family: only the iptables-nft tables count, never ours or anyone's") {
  IptablesCleanupPlan plan;
  std::string error;
  REQUIRE(addIptablesListing(R"({"nftables":[{"metainfo":{"version":"1.0.6"}},
      {"chain":{"family":"ip","table":"nat","name":"PREROUTING","handle":1,"type":"nat","hook":"prerouting","prio":-100}},
      {"chain":{"family":"ip","table":"nat","name":"KUBE-SERVICES","handle":5}},
      {"chain":{"family":"ip","table":"kube-proxy","name":"KUBE-SERVICES","handle":9}},
      {"chain":{"family":"ip","table":"raw","name":"KUBE-SEP-X","handle":2}},
      {"chain":{"family":"inet","table":"filter","name":"KUBE-FORWARD","handle":3}},
      {"chain":{"family":"ip6","table":"mangle","name":"KUBE-PROXY-CANARY","handle":4}},
      {"rule":{"family":"ip","table":"kube-proxy","chain":"nat-output","handle":7,"expr":[{"jump":{"target":"KUBE-SERVICES"}}]}}]})",
                             &plan, &error));
  REQUIRE(plan.upstreamChains.size() == 2);
  CHECK(plan.upstreamChains[0].table == "nat");
  CHECK(plan.upstreamChains[1].family == "ip6");
  REQUIRE(plan.otherChains.size() == 1);
  CHECK(plan.otherChains[0].name == "PREROUTING");
  CHECK(plan.ruleDeletes.empty());
  CHECK(listChainsCommand("ip6") == R"({"nftables":[{"list":{"chains":{"family":"ip6"}}}]})");
  CHECK(listChainCommand({"ip", "nat", "PRE\"ROUTING"}) ==
        R"({"nftables":[{"list":{"chain":{"family":"ip","table":"nat","name":"PRE\"ROUTING"}}}]})");
}

TEST_CASE("iptables leftovers: a table without upstream's chains gives no commands; a bad listing changes nothing") {
  IptablesCleanupPlan plan;
  std::string error;
  REQUIRE(addIptablesListing(R"({"nftables":[{"table":{"family":"ip6","name":"nat","handle":1}},
      {"chain":{"family":"ip6","table":"nat","name":"POSTROUTING","handle":1,"type":"nat","hook":"postrouting","prio":100}},
      {"rule":{"family":"ip6","table":"nat","chain":"POSTROUTING","handle":2,"expr":[{"jump":{"target":"KUBE-FIREWALL"}}]}}]})",
                              &plan, &error));
  CHECK(commandsOf(plan).empty());
  CHECK_FALSE(addIptablesListing("{\"nftables\": [", &plan, &error));
  CHECK_FALSE(error.empty());
  CHECK(commandsOf(plan).empty());
}

TEST_CASE("iptables leftovers: names from the kernel are escaped, never spliced into the JSON") {
  IptablesCleanupPlan plan;
  std::string error;
  REQUIRE(addIptablesListing(R"({"nftables":[
      {"chain":{"family":"ip","table":"filter","name":"FORWARD","handle":1,"type":"filter","hook":"forward","prio":0}},
      {"chain":{"family":"ip","table":"filter","name":"KUBE-SVC-\"},{\"x","handle":2}},
      {"chain":{"family":"ip","table":"filter","name":"KUBE-SERVICES","handle":4}},
      {"rule":{"family":"ip","table":"filter","chain":"FORWARD","handle":3,"expr":[{"xt":{"type":"match","name":"comment"}},{"jump":{"target":"KUBE-SERVICES"}}]}}]})",
                              &plan, &error));
  REQUIRE(commandsOf(plan).size() == 5);
  rapidjson::Document d;
  std::string txn = cleanupTransactionJson(plan);
  d.Parse(txn.c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(std::string(d["nftables"][0]["delete"]["rule"]["chain"].GetString()) == "FORWARD");
  CHECK(std::string(d["nftables"][1]["flush"]["chain"]["name"].GetString()) == "KUBE-SVC-\"},{\"x");
  CHECK(std::string(d["nftables"][3]["delete"]["chain"]["name"].GetString()) == "KUBE-SVC-\"},{\"x");
}

// Upstream's own clean-up deletes only the jumps it added to the built-in chains, each with its
// comment; a rule of anyone else that jumps to one of its chains stayed, and so must that chain.
// We used to delete every rule that jumped to an upstream chain, a CNI's `-j KUBE-MARK-MASQ` too.
TEST_CASE("iptables leftovers: another agent's jumps to upstream's chains stay, and so do the chains they name") {
  IptablesCleanupPlan plan;
  std::string error;
  REQUIRE(addIptablesListing(R"({"nftables":[
      {"chain":{"family":"ip","table":"nat","name":"POSTROUTING","handle":1,"type":"nat","hook":"postrouting","prio":100}},
      {"chain":{"family":"ip","table":"nat","name":"PREROUTING","handle":2,"type":"nat","hook":"prerouting","prio":-100}},
      {"chain":{"family":"ip","table":"nat","name":"CNI-abc","handle":3}},
      {"chain":{"family":"ip","table":"nat","name":"KUBE-MARK-MASQ","handle":4}},
      {"chain":{"family":"ip","table":"nat","name":"KUBE-SERVICES","handle":5}},
      {"chain":{"family":"ip","table":"nat","name":"KUBE-POSTROUTING","handle":6}},
      {"chain":{"family":"ip","table":"nat","name":"KUBE-SVC-AAAAAAAAAAAAAAAA","handle":7}},
      {"rule":{"family":"ip","table":"nat","chain":"CNI-abc","handle":10,"expr":[{"xt":{"type":"match","name":"comment"}},{"jump":{"target":"KUBE-MARK-MASQ"}}]}},
      {"rule":{"family":"ip","table":"nat","chain":"CNI-abc","handle":11,"expr":[{"goto":{"target":"KUBE-SVC-AAAAAAAAAAAAAAAA"}}]}},
      {"rule":{"family":"ip","table":"nat","chain":"PREROUTING","handle":12,"expr":[{"xt":{"type":"match","name":"comment"}},{"jump":{"target":"KUBE-SERVICES"}}]}},
      {"rule":{"family":"ip","table":"nat","chain":"PREROUTING","handle":13,"expr":[{"jump":{"target":"KUBE-SERVICES"}}]}},
      {"rule":{"family":"ip","table":"nat","chain":"POSTROUTING","handle":14,"expr":[{"xt":{"type":"match","name":"comment"}},{"jump":{"target":"KUBE-MARK-MASQ"}}]}},
      {"rule":{"family":"ip","table":"nat","chain":"POSTROUTING","handle":15,"expr":[{"xt":{"type":"match","name":"comment"}},{"jump":{"target":"KUBE-POSTROUTING"}}]}}]})",
                             &plan, &error));
  auto v = byVerb(plan);
  // Upstream's two comment-carrying jumps go. Its PREROUTING jump without a comment (not one upstream
  // writes), and every rule in the CNI's chain, stay.
  CHECK(v["delete rule"] == std::vector<std::string>{"PREROUTING#12", "POSTROUTING#15"});
  // KUBE-MARK-MASQ is named by rules that stay: untouched. KUBE-SERVICES and the KUBE-SVC- chain are
  // named too: emptied of upstream's rules, kept. KUBE-POSTROUTING goes.
  CHECK(v["flush chain"] == std::vector<std::string>{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-SVC-AAAAAAAAAAAAAAAA"});
  CHECK(v["delete chain"] == std::vector<std::string>{"KUBE-POSTROUTING"});
  std::vector<std::string> kept;
  for (const auto& c : cleanupCommands(plan).kept) kept.push_back(c.name);
  CHECK(kept == std::vector<std::string>{"KUBE-MARK-MASQ", "KUBE-SERVICES", "KUBE-SVC-AAAAAAAAAAAAAAAA"});
  CHECK(isUpstreamJumpRule("filter", "INPUT", "KUBE-SERVICES"));  // added by 1.13 to 1.19
  CHECK_FALSE(isUpstreamJumpRule("nat", "INPUT", "KUBE-SERVICES"));
  CHECK_FALSE(isUpstreamJumpRule("nat", "POSTROUTING", "KUBE-MARK-MASQ"));
}

TEST_CASE("iptables leftovers: iptables-legacy is reported with the tables it holds and what to run") {
  std::map<std::string, std::string> files;
  auto read = [&](const char* p) -> std::optional<std::string> {
    auto it = files.find(p);
    return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  CHECK_FALSE(legacyIptablesReport(read));  // no x_tables at all
  files["/proc/net/ip_tables_names"] = "";
  files["/proc/net/ip6_tables_names"] = "";
  CHECK_FALSE(legacyIptablesReport(read));  // x_tables loaded, no table in this namespace
  files["/proc/net/ip_tables_names"] = "nat\nfilter\n";
  auto r = legacyIptablesReport(read);
  REQUIRE(r);
  CHECK(r->find("(iptables-legacy: filter nat)") != std::string::npos);
  CHECK(r->find("iptables-legacy-save") != std::string::npos);
  CHECK(r->find("kube-proxy --cleanup") != std::string::npos);
  files["/proc/net/ip6_tables_names"] = "mangle\n";
  CHECK(legacyIptablesReport(read)->find("iptables-legacy: filter nat; ip6tables-legacy: mangle") != std::string::npos);
}
