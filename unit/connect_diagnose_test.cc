// What the API client says when it cannot reach the API server: the address and the errno, not
// cpprest's "Failed to connect to any resolved endpoint". Loopback only.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pkg/kube/connect_diagnose.h"

using namespace kpn::kube;

namespace {

// A loopback port nothing listens on: bound once, then closed.
int closedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("connect diagnosis: the address and the system's error") {
  int port = closedPort();
  CHECK(diagnoseConnect("https://127.0.0.1:" + std::to_string(port)) ==
        "connect 127.0.0.1:" + std::to_string(port) + ": Connection refused (111)");
  CHECK(diagnoseConnect("https://no-such-host.invalid:6443").rfind("resolve no-such-host.invalid: ", 0) == 0);
  // A listener answers: the failure was passing.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  CHECK(diagnoseConnect("https://127.0.0.1:" + std::to_string(ntohs(a.sin_port))).find("connects now") != std::string::npos);
  close(fd);
}

TEST_CASE("connect diagnosis: host and port of a server URL") {
  CHECK(serverAddress("https://10.0.0.1:6443").host == "10.0.0.1");
  CHECK(serverAddress("https://10.0.0.1:6443/prefix").port == "6443");
  CHECK(serverAddress("https://[fd00::1]:6443").host == "fd00::1");
  CHECK(serverAddress("https://[fd00::1]").port == "443");
  CHECK(serverAddress("https://api.example").port == "443");
  CHECK(serverAddress("http://api.example").port == "80");
}
