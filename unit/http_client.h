// A tiny blocking HTTP/1.1 client over plain sockets, so that the server tests speak real TCP
// without another HTTP library. Every read times out after two seconds: a test never hangs.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "pkg/source/unique_fd.h"

namespace kpn::testing {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& lowerName) const {
    auto it = headers.find(lowerName);
    return it == headers.end() ? "" : it->second;
  }
};

// Fills *ss with ip:port (an IPv4 or IPv6 literal) and returns its length.
inline socklen_t socketAddress(const std::string& ip, int port, sockaddr_storage* ss) {
  *ss = {};
  if (ip.find(':') == std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in*>(ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, ip.c_str(), &a->sin_addr);
    return sizeof *a;
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(ss);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr);
  return sizeof *a;
}

class HttpConnection {
 public:
  // Connects to ip:port (an IPv4 or IPv6 literal). On failure the result is not connected() and
  // error() holds the errno (ECONNREFUSED when nothing listens).
  HttpConnection(const std::string& ip, int port) {
    sockaddr_storage ss{};
    socklen_t len = socketAddress(ip, port, &ss);
    fd_.reset(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    timeval tv{2, 0};
    setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      error_ = errno;
      fd_.reset();
    }
  }

  bool connected() const { return static_cast<bool>(fd_); }
  int error() const { return error_; }

  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_.get(), data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // One whole reply (Content-Length framed); nullopt when the connection ends or times out first.
  // With head=true (the reply to a HEAD) there is no body whatever Content-Length says.
  std::optional<HttpReply> readReply(bool head = false) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return std::nullopt;
    HttpReply r;
    std::string headText = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t lineEnd = headText.find("\r\n");
    std::string statusLine = headText.substr(0, lineEnd);
    auto sp = statusLine.find(' ');
    if (sp == std::string::npos) return std::nullopt;
    r.status = std::atoi(statusLine.c_str() + sp + 1);
    size_t pos = lineEnd == std::string::npos ? headText.size() : lineEnd + 2;
    while (pos < headText.size()) {
      size_t e = headText.find("\r\n", pos);
      if (e == std::string::npos) e = headText.size();
      std::string line = headText.substr(pos, e - pos);
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        size_t v = line.find_first_not_of(' ', colon + 1);
        r.headers[name] = v == std::string::npos ? "" : line.substr(v);
      }
      pos = e + 2;
    }
    size_t length = head ? 0 : std::stoul(r.header("content-length").empty() ? "0" : r.header("content-length"));
    while (buf_.size() < length)
      if (!fill()) return std::nullopt;
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  // True when the server closes the connection (EOF or reset) within the two-second read timeout.
  bool closedByPeer() {
    char c;
    ssize_t n = ::recv(fd_.get(), &c, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  // True when the server closes the connection gracefully (EOF, not a reset) within two seconds.
  bool endOfStream() {
    char c;
    return ::recv(fd_.get(), &c, 1, 0) == 0;
  }

 private:
  bool fill() {
    char chunk[4096];
    ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  source::UniqueFd fd_;
  int error_ = 0;
  std::string buf_;
};

inline std::string getRequest(const std::string& target, const std::string& extraHeaders = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extraHeaders + "\r\n";
}

// One GET on a fresh connection; status 0 when it failed.
inline HttpReply get(const std::string& ip, int port, const std::string& target = "/") {
  HttpConnection c(ip, port);
  if (!c.connected() || !c.send(getRequest(target, "Connection: close\r\n"))) return {};
  return c.readReply().value_or(HttpReply{});
}

// A port that was free a moment ago (the kernel's choice for port 0); for servers whose port is
// given, as health-check ports are.
inline int freePort() {
  source::UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int zero = 0;
  setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 0;
  socklen_t len = sizeof a;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin6_port);
}

}  // namespace kpn::testing
