// What the `trace` command shows: one packet's trace (nft/evaluator.h) condensed for people and
// for programs. Kubernetes-free: the words for why a packet was dropped or masqueraded come from
// the rules' and elements' comments, and a caller that knows the table's layout can put better
// ones in (`reason`, `masqueradeWhy`) before rendering. The JSON is a stable contract:
// docs/trace.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nft/evaluator.h"

namespace kpn::nft::eval {

// One step of the path all candidates share (or of one candidate's own path).
struct ReportStep {
  std::string hook;
  std::string chain;   // "" for the routing decision
  std::string match;   // the rule's text; for the routing decision, what was decided
  std::string verdict; // what the rule did
  std::vector<Lookup> lookups;
};

// A dynamic set this packet's path updates (`update @set { key timeout Ns }`: session affinity)
// and whether the packet's key already is in it: then the lookup before the update found the
// entry and the packet goes where the entry says, alone; else the first pick stands and the
// connection creates the entry.
struct StickyEntry {
  std::string set;
  std::optional<std::string> entry;     // the element the packet's key found, in nft's text
  std::optional<uint64_t> expiresIn;    // its seconds left, when the table came from a listing
  uint64_t timeout = 0;                 // what the update sets (0: the set's own)
  bool kernelEntries = true;            // false: a rendered table, which has no kernel entries
};

struct Report {
  Trace trace;
  // "dnat" | "reject" | "drop" | "accept" | "unsupported" (the evaluator met something it does not
  // model; `reason` says what).
  std::string verdict;
  std::optional<std::string> service;  // the first element comment the packet's lookups met
  bool masquerade = false;             // some candidate is masqueraded
  std::string masqueradeWhy;           // the rule that decided (or that nothing did)
  std::string reason;                  // one line: why the verdict
  // The steps every candidate took, in order: where candidates differ only in their DNAT target
  // the step says "dnat to one of N"; where their paths part (one is masqueraded, another not)
  // the shared path ends and `pathComplete` is false (each candidate's own path is in `trace`).
  std::vector<ReportStep> path;
  bool pathComplete = true;
  std::optional<StickyEntry> sticky;  // when the path updates a dynamic set
};

// Condenses a trace; fills every field with the generic words. `kernelEntries`: the table is a
// listing (dynamic sets hold what the data path put there), not a rendered one.
Report makeReport(Trace trace, bool kernelEntries = true);

// For people: the packet, the verdict and why, the service, the path (lookups with their key,
// element and comment), the candidates with probability and the source each sees, masquerade.
std::string reportText(const Report& r);
// The contract of docs/trace.md, one JSON object and a newline.
std::string reportJson(const Report& r);

// The steps of one candidate, as the report shows them.
std::vector<ReportStep> reportSteps(const Candidate& c);

}  // namespace kpn::nft::eval
