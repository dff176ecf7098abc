// The start-up probe's transaction and its error reporting (the real kernel: e2e/test_80).
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "nft/kernel/probe.h"
#include "pkg/render/kernel_requirements.h"

using namespace kpn::nft;
using kpn::render::rulesetRequirements;

TEST_CASE("probe: one transaction per family creates and deletes the scratch table") {
  std::string table = scratchTableName();
  CHECK(table.rfind("kube-proxy-nft-probe-", 0) == 0);
  CHECK(table != scratchTableName());
  for (Family f : {Family::IPv4, Family::IPv6}) {
    const std::string json = probeTransactionJson(table, rulesetRequirements(), f);
    rapidjson::Document d;
    d.Parse(json.c_str());
    REQUIRE_FALSE(d.HasParseError());
    const auto& cmds = d["nftables"].GetArray();
    REQUIRE(cmds.Size() > 4);
    CHECK(cmds[0].HasMember("add"));
    CHECK(std::string(cmds[0]["add"]["table"]["family"].GetString()) == familyName(f));
    CHECK(std::string(cmds[cmds.Size() - 1]["delete"]["table"]["family"].GetString()) == familyName(f));
    // Every object lives in the scratch table of this family, and no placeholder is left.
    int objects = 0;
    for (const auto& c : cmds) {
      const auto& verb = c.MemberBegin()->value;
      const auto& obj = verb.MemberBegin()->value;
      std::string t = obj.HasMember("table") && obj["table"].IsString() ? obj["table"].GetString() : obj["name"].GetString();
      CHECK(t == table);
      CHECK(std::string(obj["family"].GetString()) == familyName(f));
      ++objects;
    }
    CHECK(objects == static_cast<int>(cmds.Size()));
    CHECK(json.find('@' + std::string("FAMILY")) == std::string::npos);
    CHECK(json.find('@' + std::string("ADDR")) == std::string::npos);
  }
  // The table alone: what tells a family the kernel does not run from a requirement it lacks.
  rapidjson::Document bare;
  bare.Parse(probeTransactionJson(table, {}, Family::IPv6).c_str());
  REQUIRE(bare["nftables"].Size() == 2);
  // Each requirement's own text parses (a typo would silently drop it from the probe).
  for (const Requirement& r : rulesetRequirements()) {
    rapidjson::Document p;
    p.Parse(requirementCommandsJson(r, table, Family::IPv4).c_str());
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
  CHECK(r.unavailable.empty());
  // Per family: everything, the table alone, then each requirement.
  CHECK(sent.size() == 2 * (2 + rulesetRequirements().size()));
  CHECK(r.line() ==
        "start-up probe: the kernel lacks what the ruleset needs: numgen (nft_numgen), fib (nft_fib_ipv4, nft_fib_ipv6) "
        "(libnftables: Error: Could not process rule: No such file or directory line 2)");
  sent.clear();
  ProbeResult fine = probeKernel(rulesetRequirements(), "t", [&](const std::string& j) { sent.push_back(j); return RunResult{}; });
  CHECK(fine.ok);
  CHECK(fine.families == std::vector<Family>{Family::IPv4, Family::IPv6});
  CHECK(sent.size() == 2);  // the fast path: one transaction per family
}

// ipv6.disable=1, or a kernel built without nf_tables IPv6: every ip6 command fails. The probe
// used to test both families in one transaction and the daemon exited 1 on such nodes; upstream
// runs single-stack there.
TEST_CASE("probe: a kernel that runs no IPv6 nftables passes with IPv4 alone; one that runs neither fails") {
  auto noIp6 = [](const std::string& json) -> RunResult {
    if (json.find("\"family\":\"ip6\"") != std::string::npos) return {false, "Error: Could not process rule: Address family not supported by protocol"};
    return {};
  };
  ProbeResult r = probeKernel(rulesetRequirements(), "t", noIp6);
  CHECK(r.ok);
  CHECK(r.families == std::vector<Family>{Family::IPv4});
  CHECK(r.unavailable ==
        std::vector<std::string>{"ip6 (libnftables: Error: Could not process rule: Address family not supported by protocol)"});
  CHECK(r.missing.empty());

  ProbeResult none = probeKernel(rulesetRequirements(), "t", [](const std::string&) { return RunResult{false, "Operation not permitted"}; });
  CHECK_FALSE(none.ok);
  CHECK(none.families.empty());
  CHECK(none.line() ==
        "start-up probe: the kernel runs nftables for no family: ip (libnftables: Operation not permitted), "
        "ip6 (libnftables: Operation not permitted)");

  // IPv6 runs but lacks a requirement IPv4 has: named, and the daemon exits as for any lack.
  ProbeResult v6fib = probeKernel(rulesetRequirements(), "t", [](const std::string& json) -> RunResult {
    bool v6 = json.find("\"family\":\"ip6\"") != std::string::npos;
    if (v6 && json.find("\"fib\"") != std::string::npos) return {false, "fib: Operation not supported"};
    return {};
  });
  CHECK_FALSE(v6fib.ok);
  CHECK(v6fib.missing == std::vector<std::string>{"fib (nft_fib_ipv4, nft_fib_ipv6)"});
}

TEST_CASE("probe: the fake requirement is an expression no kernel has, its name JSON-escaped") {
  Requirement f = fakeRequirement("frob\"nicate");
  rapidjson::Document p;
  p.Parse(requirementCommandsJson(f, "t", Family::IPv4).c_str());
  REQUIRE_FALSE(p.HasParseError());
  CHECK(p[0]["add"]["rule"]["expr"][0].HasMember("frob\"nicate"));
}
