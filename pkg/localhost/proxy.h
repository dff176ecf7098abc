// The userspace side of NodePorts on loopback (upstream 1.37, KEP-6032; the rendering side is
// pkg/render/localhost_nodeports.h): per family, a TCP listener on 127.0.0.1 / ::1 for each
// NodePort that has endpoints; each accepted connection is relayed to one endpoint, picked at
// random (ClientIP affinity: one endpoint for every loopback client, kept while used within the
// timeout). The endpoint sees the node's own address (the kernel's choice of source for the
// route to it), as for any connection the node opens.
//
// Boost.Asio stays inside proxy.cc. Everything runs on the proxy's one thread; sync() hands it the
// wanted listeners and waits until they are in place. Listeners that go close their connections
// too (upstream's shutdown). Only clients on this host can reach a loopback listener, but their
// connections are still capped (each one holds two descriptors): past the cap a new connection is
// closed at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pkg/net/ip.h"
#include "pkg/render/localhost_nodeports.h"

namespace kpn::localhost {

struct Limits {
  size_t maxConnections = 1024;           // relayed connections at once, all listeners together
  int connectTimeoutMs = 5000;            // to the endpoint (upstream's dial timeout)
};

struct SyncResult {
  size_t listeners = 0;  // open after the sync
  // Ports whose listener could not be opened now (e.g. a host process holds the port), with the
  // reason; tried again at the next sync.
  std::vector<std::pair<int32_t, std::string>> failed;
};

class Proxy {
 public:
  explicit Proxy(Limits limits = {});
  ~Proxy();  // closes every listener and connection, then joins the thread
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Family f's listeners become exactly `want` (by nodePort): new ones are opened, gone ones
  // closed (with their connections), the rest take the new endpoints for their next connection.
  SyncResult sync(net::Family f, const std::map<int32_t, render::LocalhostNodePort>& want);
  size_t openConnections();  // relayed now, for tests

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kpn::localhost
