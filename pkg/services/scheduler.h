// How a destination picks among its endpoints for a new connection: IPVS's schedulers as far as
// nftables can do them. Chosen per service with the annotation kube-proxy-nft.io/scheduler, for
// the node with --scheduler / KubeProxyConfiguration ipvs.scheduler (docs/schedulers.md).
#pragma once

#include <string>

#include "pkg/api/types.h"

namespace kpn::services {

enum class Scheduler {
  Random,      // numgen random (upstream's nftables mode)
  RoundRobin,  // numgen inc, a rule of its own per destination: exact rotation
  SourceHash,  // jhash ip saddr over a sticky lookup table: only a changed endpoint's clients move
  LeastConnection,  // IPVS's lc from this node's conntrack: the slots name the least-loaded endpoints
};

inline const char* kSchedulerAnnotation = "kube-proxy-nft.io/scheduler";

const char* schedulerName(Scheduler s);  // "random", "round-robin", "source-hash", "least-connection"

struct SchedulerChoice {
  Scheduler scheduler = Scheduler::Random;
  bool known = true;    // false: not a scheduler name at all (the caller's default applies)
  std::string warning;  // a name we map to something else, and why; "" when exact
};

// Our names and IPVS's: "" / random; round-robin / rr; wrr -> round-robin (EndpointSlices carry no
// weights); source-hash / sh / mh; least-connection / lc; wlc -> least-connection (no weights);
// lblc, lblcr, dh, sed, nq, fo, ovf -> random, with a warning naming what nftables rules cannot
// do. Anything else: known=false.
SchedulerChoice parseScheduler(const std::string& value);

// The service's scheduler: its annotation when it names one, else `node`. `warning` (if given)
// receives one line for an annotation that is unknown or mapped to something else.
Scheduler serviceScheduler(const api::Service& svc, Scheduler node, std::string* warning = nullptr);

}  // namespace kpn::services
