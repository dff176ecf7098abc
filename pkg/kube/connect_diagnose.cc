#include "pkg/kube/connect_diagnose.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kpn::kube {

namespace {

// "10.0.0.1:6443", "[fd00::1]:6443"
std::string printable(const sockaddr* sa) {
  char ip[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    port = ntohs(in->sin_port);
    return std::string(ip) + ":" + std::to_string(port);
  }
  auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
  port = ntohs(in6->sin6_port);
  return "[" + std::string(ip) + "]:" + std::to_string(port);
}

std::string systemError(int err) { return std::string(std::strerror(err)) + " (" + std::to_string(err) + ")"; }

// 0 when the connection is made, else the errno (ETIMEDOUT past the timeout).
int tryConnect(const addrinfo* a, std::chrono::milliseconds timeout) {
  int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int err = 0;
  if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
      socklen_t len = sizeof err;
      if (n == 0) err = ETIMEDOUT;
      else if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  ::close(fd);
  return err;
}

}  // namespace

ServerAddress serverAddress(const std::string& server) {
  ServerAddress a;
  size_t scheme = server.find("://");
  std::string rest = scheme == std::string::npos ? server : server.substr(scheme + 3);
  std::string defaultPort = server.rfind("http://", 0) == 0 ? "80" : "443";
  rest = rest.substr(0, rest.find('/'));
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    a.host = rest.substr(1, close - 1);
    a.port = close + 1 < rest.size() && rest[close + 1] == ':' ? rest.substr(close + 2) : defaultPort;
  } else {
    size_t colon = rest.rfind(':');
    a.host = rest.substr(0, colon);
    a.port = colon == std::string::npos ? defaultPort : rest.substr(colon + 1);
  }
  return a;
}

std::string diagnoseConnect(const std::string& server, std::chrono::milliseconds timeout) {
  ServerAddress s = serverAddress(server);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = getaddrinfo(s.host.c_str(), s.port.c_str(), &hints, &res); rc != 0 || !res)
    return "resolve " + s.host + ": " + (rc ? gai_strerror(rc) : "no address");
  std::string why;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    int err = tryConnect(a, timeout);
    std::string one = "connect " + printable(a->ai_addr) + ": " +
                      (err == 0 ? std::string("connects now (the failure was passing)") : systemError(err));
    why += (why.empty() ? "" : "; ") + one;
    if (err == 0) break;
  }
  freeaddrinfo(res);
  return why;
}

}  // namespace kpn::kube
