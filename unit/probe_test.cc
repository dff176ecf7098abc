// The start-up probe's transaction and its error reporting (the real kernel: e2e/test_80).
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "nft/probe.h"

using namespace kpn::nft;

TEST_CASE("probe: one transaction creates and deletes the scratch table in both families") {
  std::string table = scratchTableName();
  CHECK(table.rfind("kube-proxy-nft-probe-", 0) == 0);
  CHECK(table != scratchTableName());
  rapidjson::Document d;
  d.Parse(probeTransactionJson(table, rulesetRequirements()).c_str());
  REQUIRE_FALSE(d.HasParseError());
  const auto& cmds = d["nftables"].GetArray();
  REQUIRE(cmds.Size() > 4);
  CHECK(cmds[0].HasMember("add"));
  CHECK(cmds[0]["add"].HasMember("table"));
  const auto& lastV4 = cmds[cmds.Size() - 2];
  const auto& lastV6 = cmds[cmds.Size() - 1];
  CHECK(std::string(lastV4["delete"]["table"]["family"].GetString()) == "ip");
  CHECK(std::string(lastV6["delete"]["table"]["family"].GetString()) == "ip6");
  // Every object lives in the scratch table, and no placeholder is left.
  int objects = 0;
  for (const auto& c : cmds) {
    const auto& verb = c.MemberBegin()->value;
    const auto& obj = verb.MemberBegin()->value;
    std::string t = obj.HasMember("table") && obj["table"].IsString() ? obj["table"].GetString() : obj["name"].GetString();
    CHECK(t == table);
    ++objects;
  }
  CHECK(objects == static_cast<int>(cmds.Size()));
  CHECK(probeTransactionJson(table, rulesetRequirements()).find('@' + std::string("FAMILY")) == std::string::npos);
  // Each requirement's own text parses (a typo would silently drop it from the probe).
  for (const Requirement& r : rulesetRequirements()) {
    rapidjson::Document p;
    p.Parse(r.commandsJson.c_str());
    CHECK_MESSAGE(!p.HasParseError(), r.name);
    CHECK_MESSAGE(p.IsArray(), r.name);
  }
}

TEST_CASE("probe: a failure names each missing requirement and libnftables' error, on one line") {
  std::vector<std::string> sent;
  auto run = [&](const std::string& json) -> RunResult {
    sent.push_back(json);
    if (json.find("numgen") != std::string::npos) return {false, "Error: Could not process rule: No such file or directory\nline 2"};
    if (json.find("\"fib\"") != std::string::npos) return {false, "fib: Operation not supported"};
    return {};
  };
  ProbeResult r = probeKernel(rulesetRequirements(), "t", run);
  CHECK_FALSE(r.ok);
  CHECK(r.missing == std::vector<std::string>{"numgen (nft_numgen)", "fib (nft_fib_ipv4, nft_fib_ipv6)"});
  CHECK(sent.size() == 1 + rulesetRequirements().size());
  CHECK(r.line() ==
        "start-up probe: the kernel lacks what the ruleset needs: numgen (nft_numgen), fib (nft_fib_ipv4, nft_fib_ipv6) "
        "(libnftables: Error: Could not process rule: No such file or directory line 2)");
  sent.clear();
  CHECK(probeKernel(rulesetRequirements(), "t", [&](const std::string& j) { sent.push_back(j); return RunResult{}; }).ok);
  CHECK(sent.size() == 1);  // the fast path: one transaction
}

TEST_CASE("probe: the fake requirement is an expression no kernel has, its name JSON-escaped") {
  Requirement f = fakeRequirement("frob\"nicate");
  rapidjson::Document p;
  p.Parse(f.commandsJson.c_str());
  REQUIRE_FALSE(p.HasParseError());
  CHECK(p[0]["add"]["rule"]["expr"][0].HasMember("frob\"nicate"));
}
