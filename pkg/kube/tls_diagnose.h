// Why a TLS handshake with the API server failed, in words an operator can act on. cpprest only
// reports "Error in SSL handshake"; this connects once more with OpenSSL directly, fetches the
// server's certificate without trusting it, and checks it against the configured CA and the host
// name: "not signed by the CA in file /x/ca.crt (unable to get local issuer certificate)",
// "valid, but not for 10.0.0.1", "expired". Used only on the failure path.
#pragma once

#include <string>

#include "pkg/kube/client_config.h"

namespace kpn::kube {

std::string diagnoseTls(const ClientConfig& cfg);

}  // namespace kpn::kube
