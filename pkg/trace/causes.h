// The real cause behind a trace's verdict, in Kubernetes words: the table says "no endpoints", the
// cluster state says why (no EndpointSlice, none ready, a port name that does not match); the
// table passes a packet untouched, the state says no Service has the address, or that the Service
// is headless, an ExternalName or another proxy's. And what the table alone cannot say: the daemon
// has not synced, the kernel refuses the Service, the table drifted from the state. Pure: the
// caller gathers the state, the report and the drift.
#pragma once

#include <optional>
#include <string>

#include "nft/trace_report.h"
#include "pkg/trace/drift.h"
#include "pkg/trace/frontends.h"
#include "pkg/trace/known_state.h"

namespace kpn::trace {

struct CauseContext {
  const KnownState* known = nullptr;  // null: the table is all there is
  const api::Service* service = nullptr;  // the Service the packet is about; null: none has the address
  bool addressOnly = false;               // the address is the Service's, its port is not
  bool excluded = false;                  // `service` is one the state leaves out (KnownState::excluded)
  std::optional<ServiceFrontend> frontend;
  std::optional<Drift> drift;             // the table against the state's, for `service`
  bool tableExists = true;
  std::string zone;  // this node's topology.kubernetes.io/zone
};

std::optional<nft::eval::Cause> causeOf(const nft::eval::Report& r, const CauseContext& c);

// For a Service target with nothing to trace (an ExternalName with a DNS name, a headless Service
// without ready endpoints, a name the state does not know): why.
nft::eval::Cause nothingToTrace(const ServiceTarget& t, const KnownState* known, const api::Service* svc,
                                bool excluded);

}  // namespace kpn::trace
