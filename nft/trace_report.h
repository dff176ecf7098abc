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
};

// Condenses a trace; fills every field with the generic words.
Report makeReport(Trace trace);

// For people: the packet, the verdict and why, the service, the path (lookups with their key,
// element and comment), the candidates with probability and the source each sees, masquerade.
std::string reportText(const Report& r);
// The contract of docs/trace.md, one JSON object and a newline.
std::string reportJson(const Report& r);

// The steps of one candidate, as the report shows them.
std::vector<ReportStep> reportSteps(const Candidate& c);

}  // namespace kpn::nft::eval
