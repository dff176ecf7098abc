#include "nft/kernel/probe.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

namespace kpn::nft {

namespace {

// One base chain per requirement that needs a hook of its own; rules go into "filter" otherwise.
const char* const kFilterChain =
    R"({"add":{"chain":{"family":"@FAMILY","table":"@TABLE","name":"filter","type":"filter","hook":"output","prio":0,"policy":"accept"}}})";

std::string rule(const char* chain, const char* exprs) {
  return std::string(R"({"add":{"rule":{"family":"@FAMILY","table":"@TABLE","chain":")") + chain + R"(","expr":)" +
         exprs + "}}}";
}

// Replaces the placeholders in every string of `v`.
void fill(rapidjson::Value& v, const std::map<std::string, std::string>& values, rapidjson::Document::AllocatorType& a) {
  if (v.IsString()) {
    auto it = values.find(v.GetString());
    if (it != values.end()) v.SetString(it->second.c_str(), static_cast<rapidjson::SizeType>(it->second.size()), a);
  } else if (v.IsArray()) {
    for (auto& item : v.GetArray()) fill(item, values, a);
  } else if (v.IsObject()) {
    for (auto& m : v.GetObject()) fill(m.value, values, a);
  }
}

// {"<verb>": {"table": {"family": ..., "name": ...}}}
rapidjson::Value tableCommand(const char* verb, const char* family, const std::string& table,
                              rapidjson::Document::AllocatorType& a) {
  rapidjson::Value cmd(rapidjson::kObjectType), t(rapidjson::kObjectType), body(rapidjson::kObjectType);
  body.AddMember("family", rapidjson::Value(family, a), a);
  body.AddMember("name", rapidjson::Value(table.c_str(), a), a);
  t.AddMember("table", body, a);
  cmd.AddMember(rapidjson::StringRef(verb), t, a);
  return cmd;
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

const std::vector<Requirement>& rulesetRequirements() {
  static const std::vector<Requirement> reqs = {
      {"nf_tables", "nf_tables", std::string("[") + kFilterChain + "]"},
      {"ct", "nft_ct, nf_conntrack",
       "[" + rule("filter", R"([{"match":{"op":"in","left":{"ct":{"key":"state"}},"right":["established","related"]}},{"accept":null}])") +
           "," + rule("filter", R"([{"match":{"op":"in","left":{"ct":{"key":"status"}},"right":"dnat"}},{"accept":null}])") + "]"},
      {"nat", "nft_chain_nat, nft_nat",
       R"([{"add":{"chain":{"family":"@FAMILY","table":"@TABLE","name":"dnat","type":"nat","hook":"prerouting","prio":-100,"policy":"accept"}}},)" +
           rule("dnat", R"([{"match":{"op":"==","left":{"meta":{"key":"l4proto"}},"right":"tcp"}},{"dnat":{"addr":"@ADDR","port":80}}])") + "]"},
      {"masquerade", "nft_masq",
       R"([{"add":{"chain":{"family":"@FAMILY","table":"@TABLE","name":"snat","type":"nat","hook":"postrouting","prio":100,"policy":"accept"}}},)" +
           rule("snat", R"([{"masquerade":{"flags":["fully-random"]}}])") + "]"},
      {"numgen", "nft_numgen",
       "[" + rule("filter", R"([{"vmap":{"key":{"numgen":{"mode":"random","mod":2,"offset":0}},"data":{"set":[[0,{"accept":null}],[1,{"accept":null}]]}}}])") + "]"},
      {"concatenated verdict maps", "nf_tables (concatenations, kernel >= 4.15)",
       R"([{"add":{"map":{"family":"@FAMILY","table":"@TABLE","name":"services","type":["@ADDRTYPE","inet_proto","inet_service"],"map":"verdict"}}},)" +
           rule("filter", R"([{"vmap":{"key":{"concat":[{"payload":{"protocol":"@FAMILY","field":"daddr"}},{"meta":{"key":"l4proto"}},{"payload":{"protocol":"th","field":"dport"}}]},"data":"@services"}}])") + "]"},
      {"fib", "nft_fib_ipv4, nft_fib_ipv6",
       "[" + rule("filter", R"([{"match":{"op":"==","left":{"fib":{"result":"type","flags":["daddr"]}},"right":"local"}},{"accept":null}])") + "]"},
      {"reject", "nft_reject_ipv4, nft_reject_ipv6",
       "[" + rule("filter", R"([{"match":{"op":"==","left":{"meta":{"key":"l4proto"}},"right":"tcp"}},{"reject":{"type":"tcp reset"}}])") +
           "," + rule("filter", R"([{"reject":null}])") + "]"},
      {"dynamic sets with timeouts", "nf_tables (set timeouts), nft_dynset",
       R"([{"add":{"set":{"family":"@FAMILY","table":"@TABLE","name":"affinity","type":"@ADDRTYPE","flags":["timeout"],"timeout":10800}}},)" +
           rule("filter", R"([{"set":{"op":"update","elem":{"payload":{"protocol":"@FAMILY","field":"saddr"}},"set":"@affinity"}}])") + "]"},
  };
  return reqs;
}

Requirement fakeRequirement(const std::string& name) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartArray();
  w.StartObject();
  w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
  w.Null();
  w.EndObject();
  w.EndArray();
  return {name, "test only: no kernel has it", "[" + rule("filter", sb.GetString()) + "]"};
}

std::string scratchTableName() {
  std::random_device rd;
  std::mt19937_64 gen(rd() ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char suffix[17];
  snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(gen()));
  return "kube-proxy-nft-probe-" + std::to_string(getpid()) + "-" + std::string(suffix, 8);
}

std::string probeTransactionJson(const std::string& table, const std::vector<Requirement>& reqs, Family f) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  rapidjson::Value cmds(rapidjson::kArrayType);
  const bool v4 = f == Family::IPv4;
  const char* family = familyName(f);
  std::map<std::string, std::string> values = {{"@FAMILY", family},
                                               {"@TABLE", table},
                                               {"@ADDR", v4 ? "192.0.2.1" : "2001:db8::1"},
                                               {"@ADDRTYPE", v4 ? "ipv4_addr" : "ipv6_addr"}};
  cmds.PushBack(tableCommand("add", family, table, a), a);
  if (!reqs.empty()) {
    // Every requirement but the first two uses the filter chain: declare it once.
    rapidjson::Document chain(&a);
    chain.Parse(kFilterChain);
    fill(chain, values, a);
    cmds.PushBack(rapidjson::Value(chain, a), a);
  }
  for (const Requirement& r : reqs) {
    if (r.name == "nf_tables") continue;  // the table and the filter chain are it
    rapidjson::Document part(&a);
    part.Parse(r.commandsJson.c_str());
    if (part.HasParseError() || !part.IsArray()) continue;  // our own text: a unit test parses each
    fill(part, values, a);
    for (auto& c : part.GetArray()) cmds.PushBack(rapidjson::Value(c, a), a);
  }
  cmds.PushBack(tableCommand("delete", family, table, a), a);
  doc.AddMember("nftables", cmds, a);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  doc.Accept(w);
  return sb.GetString();
}

std::string ProbeResult::line() const {
  std::string s;
  if (families.empty()) {
    s = "start-up probe: the kernel runs nftables for no family: ";
    for (size_t i = 0; i < unavailable.size(); ++i) s += (i ? ", " : "") + unavailable[i];
    return oneLine(s);
  }
  s = "start-up probe: the kernel lacks what the ruleset needs: ";
  for (size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + missing[i];
  if (!error.empty()) s += " (libnftables: " + error + ")";
  return oneLine(s);
}

ProbeResult probeKernel(const std::vector<Requirement>& reqs, const std::string& table, const RunJson& run) {
  ProbeResult out;
  for (Family f : {Family::IPv4, Family::IPv6}) {
    RunResult all = run(probeTransactionJson(table, reqs, f));
    if (all.ok) {
      out.families.push_back(f);
      continue;
    }
    RunResult bare = run(probeTransactionJson(table, {}, f));
    if (!bare.ok) {
      out.unavailable.push_back(std::string(familyName(f)) + " (libnftables: " + oneLine(bare.error) + ")");
      continue;
    }
    out.families.push_back(f);
    out.ok = false;
    bool named = false;
    for (const Requirement& r : reqs) {
      RunResult one = run(probeTransactionJson(table, {r}, f));
      if (one.ok) continue;
      named = true;
      std::string name = r.name + " (" + r.modules + ")";
      if (std::find(out.missing.begin(), out.missing.end(), name) == out.missing.end()) out.missing.push_back(name);
      if (out.error.empty()) out.error = one.error;
    }
    if (!named) {  // only the combination fails: say so rather than name nothing
      out.missing.push_back("the requirements together");
      if (out.error.empty()) out.error = all.error;
    }
  }
  if (out.families.empty()) out.ok = false;
  return out;
}

}  // namespace kpn::nft
