// The start-up kernel probe: before the first sync, check that the kernel has every piece the
// ruleset uses, in a scratch table of our own (unique name) that the same transaction creates and
// deletes, so nothing is ever left behind and nothing is ever live. A kernel without, say,
// nft_fib would otherwise reject every sync (siderolabs/pkgs#951) with an error that names no
// module; here the daemon exits 1 with one line naming what is missing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nft/model.h"
#include "nft/runner.h"

namespace kpn::nft {

// What one requirement adds to the scratch table of a family, as model values built with expr's
// builders (nothing here is nft syntax).
struct ProbeObjects {
  std::vector<SetDecl> sets;
  std::vector<Chain> chains;  // its own, with their rules: base chains for a hook it needs, targets
  std::vector<Rule> rules;    // for the probe's filter chain (hook output): what needs no hook of its own
};

// What the ruleset needs is declared by its renderer (pkg/render/kernel_requirements.h); the
// probe only runs it.
struct Requirement {
  std::string name;     // "numgen"
  std::string modules;  // what provides it: "nft_numgen"
  // Its objects in family f; none (empty function): the table and the filter chain alone are it.
  std::function<ProbeObjects(Family f)> objects;
};

// A requirement no kernel meets (an expression type that does not exist), for the e2e test of the
// probe's error line (--probe-fake-requirement).
Requirement fakeRequirement(const std::string& name);

// The commands (a JSON array) that add r's objects to `table` in family f.
std::string requirementCommandsJson(const Requirement& r, const std::string& table, Family f);

// "kube-proxy-nft-probe-<pid>-<random>".
std::string scratchTableName();

// One transaction for family f: add the scratch table, the requirements' objects, delete it.
// No requirement: the table alone (does the kernel run nftables for f at all?).
std::string probeTransactionJson(const std::string& table, const std::vector<Requirement>& reqs, Family f);

struct ProbeResult {
  bool ok = true;
  std::vector<Family> families;         // the families the kernel runs nftables for
  std::vector<std::string> unavailable;  // the others: "ip6 (libnftables: ...)"
  std::vector<std::string> missing;      // "numgen (nft_numgen)"
  std::string error;                     // libnftables' text for the first missing one
  std::string line() const;              // the one line to print on failure
};

using RunJson = std::function<RunResult(const std::string& json)>;

// Each family on its own, as upstream runs single-stack where a family's nftables is missing
// (`ipv6.disable=1`, a kernel without nf_tables IPv6): all requirements in one transaction; when
// that fails, the scratch table alone tells a family the kernel does not run (left out) from a
// requirement it lacks, and then one transaction per requirement names each missing one. ok when
// at least one family runs and every family that runs has every requirement.
ProbeResult probeKernel(const std::vector<Requirement>& reqs, const std::string& table, const RunJson& run);

}  // namespace kpn::nft
