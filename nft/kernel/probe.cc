#include "nft/kernel/probe.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "nft/json_text.h"
#include "nft/transaction.h"

namespace kpn::nft {

namespace {

// The base chain for the rules of requirements that need no hook of their own.
const char* const kFilterChain = "filter";
const Hook kFilterHook{"filter", "output", 0};

void addObjects(Transaction& txn, const Requirement& r, const std::string& table, Family f) {
  if (!r.objects) return;
  const ProbeObjects o = r.objects(f);
  for (const SetDecl& s : o.sets) txn.addSet(f, table, s);
  for (const Chain& c : o.chains) txn.addChain(f, table, c.name, c.hook);
  for (const Chain& c : o.chains)
    for (const Rule& rule : c.rules) txn.addRule(f, table, c.name, rule);
  for (const Rule& rule : o.rules) txn.addRule(f, table, kFilterChain, rule);
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

Requirement fakeRequirement(const std::string& name) {
  // Not nft syntax on purpose: an expression named as no kernel's is.
  const Stmt unknown{"{" + jsonString(name) + ":null}", name, {}, {}};
  return {name, "test only: no kernel has it",
          [unknown](Family) { return ProbeObjects{{}, {}, {makeRule({unknown})}}; }};
}

std::string requirementCommandsJson(const Requirement& r, const std::string& table, Family f) {
  Transaction txn;
  addObjects(txn, r, table, f);
  const std::string json = txn.toJson();  // {"nftables":[...]}
  const std::string head = "{\"nftables\":";
  return json.substr(head.size(), json.size() - head.size() - 1);
}

std::string scratchTableName() {
  std::random_device rd;
  std::mt19937_64 gen(rd() ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char suffix[17];
  snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(gen()));
  return "kube-proxy-nft-probe-" + std::to_string(getpid()) + "-" + std::string(suffix, 8);
}

std::string probeTransactionJson(const std::string& table, const std::vector<Requirement>& reqs, Family f) {
  Transaction txn;
  txn.addTable(f, table);
  if (!reqs.empty()) txn.addChain(f, table, kFilterChain, kFilterHook);
  for (const Requirement& r : reqs) addObjects(txn, r, table, f);
  txn.deleteTable(f, table);
  return txn.toJson();
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
