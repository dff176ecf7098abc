// Boost.Asio stays here (and in pkg/http/server.cc).
#include "pkg/localhost/proxy.h"

#include <glog/logging.h>

#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <future>
#include <random>
#include <set>
#include <thread>

namespace kpn::localhost {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

struct Listener;

// One relayed connection: the loopback client and the endpoint, bytes copied both ways, each
// direction's end passed on as a half close. Freed when the last of its handlers is done.
struct Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket c, std::shared_ptr<Listener> l);
  ~Session();
  void start(const tcp::endpoint& endpoint, int connectTimeoutMs);
  void close();
  void relay(tcp::socket& from, tcp::socket& to, std::array<char, 16384>& buf, bool& done);

  tcp::socket client, backend;
  asio::steady_timer connectTimer;
  std::shared_ptr<Listener> listener;
  std::array<char, 16384> up{}, down{};
  bool upDone = false, downDone = false, timedOut = false;
};

struct Listener : std::enable_shared_from_this<Listener> {
  Listener(asio::io_context& io, size_t& open, const Limits& limits) : acceptor(io), open(open), limits(limits) {}

  void accept();
  std::optional<tcp::endpoint> pick();
  void update(const render::LocalhostNodePort& spec);
  void shutdown() {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    for (Session* s : std::set<Session*>(sessions)) s->close();
  }

  tcp::acceptor acceptor;
  size_t& open;  // the proxy's count of relayed connections
  const Limits& limits;
  int32_t port = 0;
  std::string service;
  std::vector<tcp::endpoint> endpoints;
  std::chrono::seconds affinity{0};
  std::optional<tcp::endpoint> pinned;  // ClientIP: every loopback client is one client
  std::chrono::steady_clock::time_point pinnedUsed;
  std::mt19937 random{std::random_device{}()};
  std::set<Session*> sessions;
};

Session::Session(tcp::socket c, std::shared_ptr<Listener> l)
    : client(std::move(c)), backend(client.get_executor()), connectTimer(client.get_executor()), listener(std::move(l)) {
  listener->sessions.insert(this);
  ++listener->open;
}

Session::~Session() {
  listener->sessions.erase(this);
  --listener->open;
}

void Session::close() {
  boost::system::error_code ignored;
  connectTimer.cancel();
  client.close(ignored);
  backend.close(ignored);
}

void Session::start(const tcp::endpoint& endpoint, int connectTimeoutMs) {
  auto self = shared_from_this();
  connectTimer.expires_after(std::chrono::milliseconds(connectTimeoutMs));
  connectTimer.async_wait([self](const boost::system::error_code& ec) {
    if (ec) return;
    self->timedOut = true;  // the endpoint did not answer in time: the client sees its connection end
    self->close();
  });
  backend.async_connect(endpoint, [self, endpoint](const boost::system::error_code& ec) {
    self->connectTimer.cancel();
    if (ec || !self->client.is_open()) {
      LOG(WARNING) << "localhost nodePort " << self->listener->port << " (" << self->listener->service
                   << "): connecting to endpoint " << endpoint << " failed: "
                   << (self->timedOut ? "no answer within " + std::to_string(self->listener->limits.connectTimeoutMs) + " ms"
                                      : ec ? ec.message() : "the client left");
      self->close();
      return;
    }
    self->relay(self->client, self->backend, self->up, self->upDone);
    self->relay(self->backend, self->client, self->down, self->downDone);
  });
}

// Copies from -> to until from ends (then half-closes `to`) or either fails (then closes both).
void Session::relay(tcp::socket& from, tcp::socket& to, std::array<char, 16384>& buf, bool& done) {
  auto self = shared_from_this();
  from.async_read_some(asio::buffer(buf), [self, &from, &to, &buf, &done](const boost::system::error_code& ec, size_t n) {
    if (ec) {
      boost::system::error_code ignored;
      if (ec == asio::error::eof) {
        to.shutdown(tcp::socket::shutdown_send, ignored);
        done = true;
        if (self->upDone && self->downDone) self->close();
      } else {
        self->close();
      }
      return;
    }
    asio::async_write(to, asio::buffer(buf.data(), n), [self, &from, &to, &buf, &done](const boost::system::error_code& wec, size_t) {
      if (wec) return self->close();
      self->relay(from, to, buf, done);
    });
  });
}

void Listener::accept() {
  auto self = shared_from_this();
  acceptor.async_accept([self](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;  // closed
    if (!ec) {
      std::optional<tcp::endpoint> endpoint = self->pick();
      if (!endpoint || self->open >= self->limits.maxConnections) {
        if (endpoint) LOG(WARNING) << "localhost nodePort " << self->port << ": " << self->open
                                   << " connections relayed already (the cap); closing a new one";
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        std::make_shared<Session>(std::move(socket), self)->start(*endpoint, self->limits.connectTimeoutMs);
      }
    }
    self->accept();
  });
}

std::optional<tcp::endpoint> Listener::pick() {
  if (endpoints.empty()) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  if (affinity.count() > 0 && pinned && now - pinnedUsed <= affinity)
    for (const auto& e : endpoints)
      if (e == *pinned) {
        pinnedUsed = now;
        return e;
      }
  tcp::endpoint e = endpoints[std::uniform_int_distribution<size_t>(0, endpoints.size() - 1)(random)];
  if (affinity.count() > 0) pinned = e, pinnedUsed = now;
  return e;
}

void Listener::update(const render::LocalhostNodePort& spec) {
  service = spec.service;
  endpoints.clear();
  for (const auto& [ip, p] : spec.endpoints) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(ip, ec);
    if (!ec) endpoints.emplace_back(addr, static_cast<uint16_t>(p));
  }
  std::chrono::seconds want(spec.affinitySeconds);
  if (want != affinity) pinned.reset();
  affinity = want;
}

}  // namespace

struct Proxy::Impl {
  explicit Impl(Limits l) : limits(l), work(asio::make_work_guard(io)), thread([this] { io.run(); }) {}
  ~Impl() {
    run([this] {
      for (auto& fam : listeners)
        for (auto& [port, l] : fam) l->shutdown();
      listeners[0].clear(), listeners[1].clear();
    });
    work.reset();
    thread.join();
  }
  template <class F>
  auto run(F&& f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::forward<F>(f));
    auto result = task.get_future();
    asio::post(io, [&task] { task(); });
    return result.get();
  }

  Limits limits;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  size_t open = 0;
  std::map<int32_t, std::shared_ptr<Listener>> listeners[2];  // IPv4, IPv6
  std::thread thread;  // last: it runs on everything above
};

Proxy::Proxy(Limits limits) : impl_(std::make_unique<Impl>(limits)) {}
Proxy::~Proxy() = default;

size_t Proxy::openConnections() {
  return impl_->run([this] { return impl_->open; });
}

SyncResult Proxy::sync(net::Family f, const std::map<int32_t, render::LocalhostNodePort>& want) {
  return impl_->run([&] {
    SyncResult r;
    auto& mine = impl_->listeners[f == net::Family::V4 ? 0 : 1];
    for (auto it = mine.begin(); it != mine.end();) {
      if (want.count(it->first)) {
        ++it;
        continue;
      }
      VLOG(2) << "localhost nodePort " << it->first << ": listener closed";
      it->second->shutdown();
      it = mine.erase(it);
    }
    const auto address = asio::ip::make_address(render::loopbackAddress(f));
    for (const auto& [port, spec] : want) {
      auto have = mine.find(port);
      if (have != mine.end()) {
        have->second->update(spec);
        continue;
      }
      auto l = std::make_shared<Listener>(impl_->io, impl_->open, impl_->limits);
      l->port = port;
      l->update(spec);
      boost::system::error_code ec;
      tcp::endpoint at(address, static_cast<uint16_t>(port));
      l->acceptor.open(at.protocol(), ec);
      if (!ec) l->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec && f == net::Family::V6) l->acceptor.set_option(asio::ip::v6_only(true), ec);
      if (!ec) l->acceptor.bind(at, ec);
      if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        r.failed.emplace_back(port, ec.message());
        continue;
      }
      VLOG(2) << "localhost nodePort " << port << " (" << spec.service << "): listening on " << at << ", "
              << spec.endpoints.size() << " endpoint(s)";
      l->accept();
      mine.emplace(port, std::move(l));
    }
    r.listeners = mine.size();
    return r;
  });
}

}  // namespace kpn::localhost
