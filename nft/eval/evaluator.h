// A packet evaluator: runs the first packet of a connection through nftables tables the way
// netfilter would, and says what becomes of it — accepted untouched, DNATed to which candidates
// with which probability and with which source address the endpoint sees, dropped or rejected —
// and along which path. It interprets the rules' JSON (as nft lists it), not our render code, so
// it traces a rendered model and a table listed from the kernel alike. Kubernetes-free.
//
// What it models: base chains by hook and priority (prerouting, then the routing decision —
// local destination → input, else forward —, postrouting; output for the node's own packets),
// jump/goto/return, the first packet of a connection (ct state new; ct status dnat after a DNAT;
// nat chains once per hook), sets and maps (named, anonymous, concatenations, prefixes, ranges),
// verdict maps, dnat through maps, masquerade, marks, fib type local, numgen/jhash (every slot
// enumerated), dynamic set updates (reported per candidate; entries alive given by the caller). What it does not: see docs/architecture.md ("The packet evaluator").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nft/eval/eval_table.h"
#include "nft/model.h"

namespace kpn::nft::eval {

// Where the packet enters: arriving on an interface (from a pod or from outside the node: the
// source address and input interface say which), or sent by the node itself.
enum class Entry { Prerouting, Output };

struct Packet {
  Family family = Family::IPv4;
  std::string saddr;
  uint16_t sport = 40000;
  std::string daddr;
  uint16_t dport = 0;
  std::string protocol = "tcp";  // tcp | udp | sctp
  std::string iifname;           // input interface (prerouting); empty for output
  Entry entry = Entry::Prerouting;
  uint32_t length = 60;          // meta length: a SYN with options over IPv4 (our rules mask it to a constant)
};

struct Route {
  std::string cidr;    // e.g. "10.244.1.0/24"
  std::string ifname;  // e.g. "cni0"
};

// An entry the data path put into a dynamic set (`update @set { key timeout Ns }`: session
// affinity): reported on the candidate that added it, and given back to later traces in
// Environment::dynamicEntries to say "this entry is alive now" (time is not modelled: an entry
// that timed out is simply not given).
struct SetEntry {
  std::string set;       // without '@'
  std::string key;       // the key's canonical form (as lookups compare it)
  std::string text;      // readable: "10.0.1.5 . 10.96.0.10 . 80 . 1"
  uint64_t timeout = 0;  // seconds; 0: the set's own
  bool operator==(const SetEntry& o) const { return set == o.set && key == o.key && timeout == o.timeout; }
};

struct Environment {
  // Entries alive in dynamic sets before this packet (earlier connections' SetEntry values).
  std::vector<SetEntry> dynamicEntries;
  // The node's own addresses (both families): `fib … type local`, and the routing decision after
  // prerouting (a local destination goes to input, anything else is forwarded). Loopback always is.
  std::vector<std::string> localAddresses;
  // The address a masqueraded packet leaves with, per family (IPv4, IPv6).
  std::string masqueradeSource[2];
  // For meta oifname: the most specific matching route; else defaultInterface ("lo" for local).
  std::vector<Route> routes;
  std::string defaultInterface = "eth0";
};

enum class Verdict {
  Accept,       // reached its destination (untouched, or with the translation of its candidate)
  Dnat,         // whole-trace only: at least one candidate was DNATed
  Drop,
  Reject,
  Mixed,        // whole-trace only: untranslated outcomes that differ
  Unsupported,  // the tables hold something the evaluator does not model: see reason
};
const char* verdictName(Verdict v);

// How a branch point chose among its N values.
enum class Selection { None, Random, RoundRobin, Hash };
const char* selectionName(Selection s);

// A named set or map a rule looked the packet up in, and the element it found.
struct Lookup {
  std::string set;      // without the '@'
  std::string key;      // the packet's key, e.g. "10.96.0.10 . tcp . 80"
  std::string element;  // the matching element's key, in nft's text (a prefix or range may differ from key)
  std::string value;    // its value ("goto pick-tcp-2", "10.244.0.12 . 8080"); "" for a set
  std::string comment;  // the element's comment, "" when it has none
  // Seconds the element has left, when the table came from a listing and the data path added it
  // with a timeout (a dynamic set's entry: session affinity); nullopt otherwise.
  std::optional<uint64_t> expiresIn;
};

struct Step {
  std::string hook;     // e.g. "prerouting", for the base chain the rule ran in
  std::string chain;
  std::string rule;     // the rule's text (or its JSON, for a listing), with its comment
  std::string action;   // what the rule did: "jump services", "dnat to 10.0.0.1:80", "drop", ...
  std::string comment;  // the rule's comment alone
  std::vector<Lookup> lookups;  // the named sets and maps of the rule that had the packet, in order
};

// One way the packet can go. A trace has one per distinct result; their probabilities add to 1.
struct Candidate {
  Verdict verdict = Verdict::Accept;  // Accept, Drop, Reject or Unsupported
  bool translated = false;            // DNATed: address/port below are the new destination
  std::string address;                // the destination it reaches (after DNAT)
  uint16_t port = 0;
  double probability = 1.0;
  Selection selection = Selection::None;
  bool masquerade = false;
  std::string sourceSeen;             // the source address its destination sees
  // Things worth telling: a map lookup that found no element for this branch's slot (the kernel
  // then ends that rule and goes on with the next one), an unsupported expression, ...
  std::vector<std::string> notes;
  std::vector<SetEntry> recorded;     // what this packet added to or refreshed in dynamic sets
  std::vector<Step> path;
  // Every named set or map lookup the packet made, found or not, as "chain @set", in order: the
  // first packet's cost (a rule that did not match is in no step, but its lookup was made).
  std::vector<std::string> setLookups;
  // The chains as `nft monitor trace` names them, in order: a chain each time one of its rules
  // had the packet (matched and continued, or decided), and a base chain again where its policy
  // applied. Chains entered without any rule matching are not named (the kernel says nothing).
  std::vector<std::string> chains;
};

struct Trace {
  Family family = Family::IPv4;
  Packet packet;                      // what was sent
  Verdict verdict = Verdict::Accept;
  std::vector<Candidate> candidates;  // most probable first
  std::string reason;                 // one line: why the verdict
};

// Keeps what it parsed of the tables (rule JSON, hashed set elements) between packets, so that
// many traces through one big table pay for its ~100k elements once. One thread at a time.
class Evaluator {
 public:
  explicit Evaluator(std::vector<EvalTable> tables);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;
  Trace trace(const Packet& packet, const Environment& env);

 private:
  struct Parsed;
  std::vector<EvalTable> tables_;
  std::unique_ptr<Parsed> parsed_;
};

// Runs `packet` through `tables` (those of other families are skipped).
Trace evaluate(const std::vector<EvalTable>& tables, const Packet& packet, const Environment& env);
// The same for our model.
Trace evaluate(const Ruleset& rs, const Packet& packet, const Environment& env);

// A readable rendering: one line per candidate, then each candidate's path.
std::string traceText(const Trace& t);

}  // namespace kpn::nft::eval
