// Upstream's "host:port" bind addresses (--metrics-bind-address, --healthz-bind-address):
// "0.0.0.0:10256", "[::1]:10249", ":10256"; host a literal IP. Empty means disabled, and so does
// port 0 for the metrics server (upstream's v1alpha1 convention).
#pragma once

#include <optional>
#include <string>

namespace kpn::http {

struct BindAddress {
  // As Server::listen takes it: "" for every address of both families. A wildcard (0.0.0.0 or
  // ::) also means both families, as Go's net.Listen gives upstream for either.
  std::string host;
  int port = 0;
};

// nullopt with *error set when text is not host:port with a literal IP and a port in 0..65535.
std::optional<BindAddress> parseBindAddress(const std::string& text, std::string* error);

}  // namespace kpn::http
