// The start-up kernel probe: before the first sync, check that the kernel has every piece the
// ruleset uses, in a scratch table of our own (unique name) that the same transaction creates and
// deletes, so nothing is ever left behind and nothing is ever live. A kernel without, say,
// nft_fib would otherwise reject every sync (siderolabs/pkgs#951) with an error that names no
// module; here the daemon exits 1 with one line naming what is missing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nft/runner.h"

namespace kpn::nft {

struct Requirement {
  std::string name;     // "numgen"
  std::string modules;  // what provides it: "nft_numgen"
  // Commands (JSON array text) that use it inside the scratch table, for each family. Family,
  // table, address and protocol fields are filled in: "@FAMILY", "@TABLE", "@ADDR", "@ADDRTYPE".
  std::string commandsJson;
};

// What the ruleset needs: nf_tables, ct, nat, masquerade, numgen, concatenated verdict maps,
// fib, reject, dynamic sets with timeouts.
const std::vector<Requirement>& rulesetRequirements();

// A requirement no kernel meets (an expression type that does not exist), for the e2e test of the
// probe's error line (--probe-fake-requirement).
Requirement fakeRequirement(const std::string& name);

// "kube-proxy-nft-probe-<pid>-<random>".
std::string scratchTableName();

// One transaction: add the scratch table in ip and ip6, the requirements' objects, delete both.
std::string probeTransactionJson(const std::string& table, const std::vector<Requirement>& reqs);

struct ProbeResult {
  bool ok = true;
  std::vector<std::string> missing;  // "numgen (nft_numgen)"
  std::string error;                 // libnftables' text for the first missing one
  std::string line() const;          // the one line to print on failure
};

using RunJson = std::function<RunResult(const std::string& json)>;

// All requirements in one transaction; when that fails, one transaction per requirement to name
// each missing one.
ProbeResult probeKernel(const std::vector<Requirement>& reqs, const std::string& table, const RunJson& run);

// A libnftables context of its own (JSON), for the probe only.
RunResult runJsonOnce(const std::string& json);

}  // namespace kpn::nft
