// Decoding of the Kubernetes objects a service proxy reads (v1 Service,
// discovery.k8s.io/v1 EndpointSlice, v1 Node, networking.k8s.io/v1 ServiceCIDR, and Lists of them) from manifest text, exactly as
// `kubectl get -o json|yaml` prints them. Everything is validated here, at the edge: what comes
// out only holds names, ports and canonical addresses that are safe to render into nftables.
// The RapidJSON entry point (for the API-watch source) is in decode_json.h.
#pragma once

#include <memory>
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

// The same in two halves, for a whole file read into a scratch buffer, so that parsing (the
// bigger half) and decoding can run on different threads: the parse makes no objects and touches
// nothing shared. JSON is parsed in place: `text` is overwritten, its byte text[size] must be
// writable (a NUL goes there), and it must outlive the ParsedManifest. Same results, same errors.
class ParsedManifest {
 public:
  ParsedManifest();
  ~ParsedManifest();
  ParsedManifest(ParsedManifest&&) noexcept;
  ParsedManifest& operator=(ParsedManifest&&) noexcept;
  // Drops the documents (before their text is reused) but keeps the room they took, for the
  // next parse into this object.
  void clear();

  struct Documents;  // the JSON documents (one per YAML document)

 private:
  friend bool parseManifestInPlace(char* text, size_t size, bool json, ParsedManifest& out,
                                   std::string* syntaxError);
  friend void decodeParsedManifest(const ParsedManifest& parsed, DecodedObjects& out);
  std::unique_ptr<Documents> docs_;
};
// False, with *syntaxError set, when the text does not parse at all.
bool parseManifestInPlace(char* text, size_t size, bool json, ParsedManifest& out, std::string* syntaxError);
// Appends the parsed documents' objects to `out`, as decodeManifest does.
void decodeParsedManifest(const ParsedManifest& parsed, DecodedObjects& out);

}  // namespace kpn::api
