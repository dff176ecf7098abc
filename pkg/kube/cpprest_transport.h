// The Transport that talks to a real API server, over cpprestsdk (TLS via OpenSSL). This header
// is cpprest-free on purpose: cpprest's headers cost seconds per file that includes them, so only
// cpprest_transport.cc does.
#pragma once

#include <chrono>
#include <memory>

#include "pkg/kube/client_config.h"
#include "pkg/kube/transport.h"

namespace kpn::kube {

struct TransportTimeouts {
  std::chrono::seconds request{30};  // lists and other plain requests: inactivity limit
  std::chrono::seconds watch{660};   // watches: above the longest timeoutSeconds we ask for
};

std::unique_ptr<Transport> makeCpprestTransport(const ClientConfig& cfg, TransportTimeouts timeouts = {},
                                                RequestHook onRequest = nullptr);

}  // namespace kpn::kube
