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

// Why, in the words of whoever knows more than the table (pkg/trace knows the cluster state): a
// named cause, one line, and the counts and objects it is about. Rendered as given.
struct Cause {
  std::string code;     // stable, for programs: "no-endpoint-slice", "drift", ...
  std::string message;  // one line, for people
  std::vector<std::pair<std::string, int64_t>> counts;
  std::vector<std::string> objects;
};

// Which address of which service a report traces (a trace by service name traces several).
struct Frontend {
  std::string kind;     // "ClusterIP", "externalIP", "LoadBalancer", "NodePort", "endpoint", "externalName"
  std::string service;  // ns/name
  std::string port;     // the service port's name, or its number when unnamed
};

// Where the explanations came from: the running daemon's state, a source flag's, or none.
struct StateInfo {
  std::string origin;  // "daemon" | "source" | "none"
  bool synced = false;
  uint64_t servicesKnown = 0;
  std::string note;  // e.g. why there is no state
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
  std::optional<Cause> cause;         // set by a caller that knows why
  std::optional<Frontend> frontend;
  std::optional<StateInfo> state;
};

// A trace by service name: every address of the service, each its own report; or none (an
// ExternalName, a Service no state knows), and then the cause says why.
struct ServiceReport {
  std::string service;  // ns/name
  std::string port;     // as asked ("" for all ports)
  std::vector<Report> frontends;
  std::optional<Cause> cause;  // when there is nothing to trace
  std::optional<StateInfo> state;
  std::vector<std::string> skipped;  // addresses not traced, and why
};

// Condenses a trace; fills every field with the generic words. `kernelEntries`: the table is a
// listing (dynamic sets hold what the data path put there), not a rendered one.
Report makeReport(Trace trace, bool kernelEntries = true);

// For people: the packet, the verdict and why, the service, the path (lookups with their key,
// element and comment), the candidates with probability and the source each sees, masquerade.
std::string reportText(const Report& r);
// The contract of docs/trace.md, one JSON object and a newline.
std::string reportJson(const Report& r);

// Every address, each as reportText would show it under a heading; the cause when none.
std::string serviceReportText(const ServiceReport& r);
// The first address's report object (the contract above, for a client that reads one trace), plus
// "target" and "frontends" (every address's report object); with no address, only "target",
// "cause", "state" and an empty "frontends".
std::string serviceReportJson(const ServiceReport& r);

// The steps of one candidate, as the report shows them.
std::vector<ReportStep> reportSteps(const Candidate& c);

}  // namespace kpn::nft::eval
