#include "pkg/services/scheduler.h"

#include <map>

namespace kpn::services {

const char* schedulerName(Scheduler s) {
  switch (s) {
    case Scheduler::Random: return "random";
    case Scheduler::RoundRobin: return "round-robin";
    case Scheduler::SourceHash: return "source-hash";
    case Scheduler::LeastConnection: return "least-connection";
  }
  return "random";
}

SchedulerChoice parseScheduler(const std::string& value) {
  static const std::map<std::string, Scheduler> exact = {
      {"", Scheduler::Random},           {"random", Scheduler::Random},          {"round-robin", Scheduler::RoundRobin},
      {"rr", Scheduler::RoundRobin},     {"source-hash", Scheduler::SourceHash}, {"sh", Scheduler::SourceHash},
      {"mh", Scheduler::SourceHash},     {"least-connection", Scheduler::LeastConnection},
      {"lc", Scheduler::LeastConnection},
  };
  // What each other IPVS scheduler needs that a stateless nftables rule cannot have.
  // Why each IPVS scheduler we do not implement falls back to random.
  static const std::map<std::string, const char*> impossible = {
      {"lblc", "needs per-destination connection counts, which nftables rules cannot see"},
      {"lblcr", "needs per-destination connection counts, which nftables rules cannot see"},
      {"dh", "hashes the destination address, which is the service's own"},
      {"sed", "shortest expected delay is not implemented (least-connection, lc, is the nearest)"},
      {"nq", "never-queue is not implemented (least-connection, lc, is the nearest)"},
      {"fo", "needs endpoint weights, which EndpointSlices do not carry"},
      {"ovf", "needs endpoint weights, which EndpointSlices do not carry"},
  };
  if (auto e = exact.find(value); e != exact.end()) return {e->second, true, ""};
  if (value == "wrr")
    return {Scheduler::RoundRobin, true,
            "scheduler \"wrr\": EndpointSlices carry no weights, so every endpoint has weight 1: round-robin"};
  if (value == "wlc")
    return {Scheduler::LeastConnection, true,
            "scheduler \"wlc\": EndpointSlices carry no weights, so every endpoint has weight 1: least-connection"};
  if (auto i = impossible.find(value); i != impossible.end())
    return {Scheduler::Random, true,
            "scheduler \"" + value + "\": " + i->second + ": random"};
  return {Scheduler::Random, false, ""};
}

Scheduler serviceScheduler(const api::Service& svc, Scheduler node, std::string* warning) {
  auto a = svc.meta.annotations.find(kSchedulerAnnotation);
  if (a == svc.meta.annotations.end()) return node;
  SchedulerChoice c = parseScheduler(a->second);
  if (warning) {
    if (!c.known)
      *warning = std::string("annotation ") + kSchedulerAnnotation + "=\"" + a->second +
                 "\" is not a scheduler (random, round-robin, source-hash, least-connection): using " + schedulerName(node);
    else
      *warning = c.warning;
  }
  return c.known ? c.scheduler : node;
}

}  // namespace kpn::services
