// The daemon's servers on a port someone else holds: without hard fail they keep retrying and
// serve once the port is free; with it the caller gets the one line to exit with.
#include "pkg/http/retrying_server.h"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "unit/http_client.h"

using namespace kpn;
using namespace kpn::testing;
using namespace std::chrono_literals;

namespace {
http::Response ok(const http::Request&) { return {200, {{"Content-Type", "text/plain"}}, "ok"}; }
}  // namespace

TEST_CASE("retrying server: a taken port is retried until free; hard fail says why instead") {
  http::Loop loop;
  std::string err;
  auto holder = http::Server::listen(loop, "127.0.0.1", 0, ok, &err);
  REQUIRE(holder);
  const int port = holder->port();

  auto hard = http::RetryingServer::start(loop, "metrics", "127.0.0.1", port, ok, true, &err);
  CHECK(hard == nullptr);
  CHECK(err == "metrics server: bind 127.0.0.1:" + std::to_string(port) +
                   ": Address already in use (bindAddressHardFail: exiting)");

  auto soft = http::RetryingServer::start(loop, "metrics", "127.0.0.1", port, ok, false, &err, 20ms);
  REQUIRE(soft != nullptr);
  CHECK_FALSE(soft->listening());
  holder.reset();
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!soft->listening() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  REQUIRE(soft->listening());
  CHECK(soft->port() == port);
  CHECK(get("127.0.0.1", port, "/").body == "ok");
}
