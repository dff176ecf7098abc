// Drift: what the kernel's table holds for one Service against what the cluster state renders for
// it, object by object: the elements whose comment names the Service ("ns/name" or
// "ns/name:port") and the chains of its own (affinity-ns/name/...). The state's table is rendered with
// the kernel's endpoint slots adopted (Renderer::adoptSlots), so an endpoint that only sits in
// another slot is no difference.
#pragma once

#include <string>
#include <vector>

#include "nft/listing.h"
#include "nft/model.h"

namespace kpn::trace {

struct Drift {
  std::vector<std::string> missing;     // the state's, not in the kernel: "@set key : value", "chain NAME"
  std::vector<std::string> unexpected;  // the kernel's, not the state's
  bool any() const { return !missing.empty() || !unexpected.empty(); }
};

Drift serviceDrift(const nft::ListedTable& live, const nft::Table& desired, const std::string& service);

}  // namespace kpn::trace
