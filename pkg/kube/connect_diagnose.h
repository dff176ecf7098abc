// Why a connection to the API server failed, naming the address and the system's error:
// "connect 10.0.0.1:6443: Connection refused (111)". cpprest says only "Failed to connect to any
// resolved endpoint" (and reports a refused connection as EHOSTUNREACH): this resolves the host
// and connects once more itself, each address for at most `timeout`. Used only on the failure
// path, before the reflector's backoff.
#pragma once

#include <chrono>
#include <string>

namespace kpn::kube {

struct ServerAddress {
  std::string host;  // without brackets
  std::string port;  // the scheme's when the URL has none
};

// host and port of "https://host:port/prefix" ("[fd00::1]:6443" for IPv6).
ServerAddress serverAddress(const std::string& server);

std::string diagnoseConnect(const std::string& server, std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace kpn::kube
