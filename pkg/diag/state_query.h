// The questions `status` and `trace` put to the daemon over its socket, and the answer to a state
// question: the daemon's status, its configuration and the objects of its cluster state that one
// trace needs (a Service with its EndpointSlices, every Service sharing one of its addresses, the
// Node, the ServiceCIDRs), as Kubernetes JSON. One JSON object a line each way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pkg/api/decode.h"
#include "pkg/diag/daemon_status.h"

namespace kpn::diag {

struct StateQuery {
  enum class Kind { Status, Service, Address };
  Kind kind = Kind::Status;
  std::string ns, name;   // Service
  std::string ip;         // Address (canonical)
  uint16_t port = 0;      // Address: 0 for any
  std::string protocol;   // Address: "tcp" | "udp" | "sctp"
};

std::string queryLine(const StateQuery& q);
// Validates what a client sent: names are DNS-1123, the address an IP. nullopt and *error else.
std::optional<StateQuery> parseQuery(const std::string& line, std::string* error);

// What the daemon answers a Service or Address question with.
struct StateAnswer {
  DaemonStatus status;
  std::string configYaml;  // the daemon's KubeProxyConfiguration (pkg/config/encode)
  std::string nodeName;
  api::DecodedObjects objects;
  // A Service by the asked name that the daemon's source leaves out (another proxy's, or
  // labelled headless), asked of the source outside its selector.
  std::optional<api::Service> excluded;
  std::string excludedLookupError;  // the source could not be asked
};

// The daemon's side: the JSON of an answer, from its parts (objects already JSON).
std::string stateAnswerJson(const std::string& statusJson, const std::string& configYaml, const std::string& nodeName,
                            const std::vector<std::string>& objectsJson, const std::optional<std::string>& excludedJson,
                            const std::string& excludedLookupError);
// The trace's side. nullopt and *error when it is not an answer (or is the daemon's error).
std::optional<StateAnswer> parseStateAnswer(const std::string& json, std::string* error);

}  // namespace kpn::diag
