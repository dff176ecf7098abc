// Decoding of the Kubernetes objects a service proxy reads (v1 Service,
// discovery.k8s.io/v1 EndpointSlice, v1 Node, networking.k8s.io/v1 ServiceCIDR, and Lists of them) from manifest text, exactly as
// `kubectl get -o json|yaml` prints them. Everything is validated here, at the edge: what comes
// out only holds names, ports and canonical addresses that are safe to render into nftables.
// The RapidJSON entry point (for the API-watch source) is in decode_json.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pkg/api/types.h"

namespace kpn::api {

struct DecodedObjects {
  std::vector<Service> services;
  std::vector<EndpointSlice> slices;  // serviceName "" when the slice has no service-name label
  std::vector<Node> nodes;
  std::vector<ServiceCIDR> serviceCIDRs;
  // One line per object that was skipped, naming it: `Service default/web: spec.ports[0].port
  // 70000 out of range (1..65535)`, `unknown kind Deployment: default/web`.
  std::vector<std::string> errors;
  // One line per part that was dropped from an object that was kept (an endpoint with a bad
  // address, a node address that is not an IP, a bad nodePort, external IP or source range, an
  // ingress without an IP).
  std::vector<std::string> warnings;
};

// Decodes a manifest file's text into `out` (appending; errors about single objects go to
// out.errors). JSON when `json`, else a multi-document YAML stream. Empty or all-whitespace
// text is a file with no objects. Returns false, with *syntaxError set and `out` untouched, when
// the text does not parse at all: the caller then keeps what the file held before. Never throws.
bool decodeManifest(std::string_view text, bool json, DecodedObjects& out, std::string* syntaxError);

}  // namespace kpn::api
