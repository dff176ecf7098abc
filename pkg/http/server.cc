// The only translation unit that includes Boost (Asio and Beast).
#include "pkg/http/server.h"

#include <glog/logging.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <optional>
#include <set>
#include <thread>

namespace kpn::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

// Shared by a Loop's servers; touched only on the loop thread.
struct ConnectionBudget {
  size_t max;
  size_t open = 0;
};

struct Loop::Impl {
  explicit Impl(size_t maxConnections) : budget{maxConnections} {}
  ConnectionBudget budget;  // first: destroyed after io, whose pending handlers hold sessions
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::thread thread;
};

Loop::Loop(size_t maxConnections) : impl_(std::make_unique<Impl>(maxConnections)) {
  impl_->thread = std::thread([io = &impl_->io] {
    for (;;) {
      try {
        io->run();
        return;
      } catch (const std::exception& e) {  // a bug in a completion handler; keep serving the others
        LOG(ERROR) << "http loop: " << e.what();
      }
    }
  });
}

Loop::~Loop() {
  impl_->work.reset();
  impl_->io.stop();
  impl_->thread.join();
}

bool Loop::onLoopThread() const { return impl_->io.get_executor().running_in_this_thread(); }

size_t Loop::openConnections() {
  size_t n = 0;
  call([&] { n = impl_->budget.open; });
  return n;
}

void Loop::call(const std::function<void()>& fn) {
  if (onLoopThread()) {
    fn();
    return;
  }
  std::promise<void> done;
  asio::post(impl_->io, [&] {
    try {
      fn();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  done.get_future().get();
}

struct Ticker::Impl : std::enable_shared_from_this<Ticker::Impl> {
  Impl(asio::io_context& io, std::chrono::milliseconds interval, std::function<void()> fn)
      : timer(io), interval(interval), fn(std::move(fn)) {}
  void arm() {
    timer.expires_after(interval);
    timer.async_wait([self = shared_from_this()](const ErrorCode& ec) {
      if (ec || self->stopped) return;
      self->fn();
      self->arm();
    });
  }
  asio::steady_timer timer;
  std::chrono::milliseconds interval;
  std::function<void()> fn;
  bool stopped = false;
};

Ticker::Ticker(Loop& loop, std::chrono::milliseconds interval, std::function<void()> fn)
    : loop_(loop), impl_(std::make_shared<Impl>(loop.impl_->io, interval, std::move(fn))) {
  loop_.call([this] { impl_->arm(); });
}

Ticker::~Ticker() {
  loop_.call([this] {
    impl_->stopped = true;
    impl_->timer.cancel();
    impl_->fn = nullptr;
    impl_.reset();  // the timer is destroyed on the loop thread (here or by its cancelled wait)
  });
}

namespace {

std::string endpointText(const std::string& address, int port) {
  if (address.empty()) return "*:" + std::to_string(port);
  if (address.find(':') != std::string::npos) return "[" + address + "]:" + std::to_string(port);
  return address + ":" + std::to_string(port);
}

class Session;

// A listening socket and its connections. Lives on the loop thread; shared by its Server and
// its sessions, so that a session's last completion handler can still run after close().
struct Listener : std::enable_shared_from_this<Listener> {
  Listener(asio::io_context& io, ConnectionBudget& budget, Handler handler, const Limits& limits, std::string name)
      : acceptor(io), retry(io), budget(budget), handler(std::move(handler)), limits(limits), name(std::move(name)) {}
  void accept();
  void close();

  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after a failed accept (EMFILE...): accepting again at once would spin
  ConnectionBudget& budget;  // the Loop's, which outlives every listener and session
  Handler handler;
  Limits limits;
  std::string name;  // "[::1]:8080", for logs
  bool closed = false;
  std::set<Session*> sessions;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Listener> owner)
      : stream_(std::move(socket)),
        buffer_(owner->limits.maxHeaderBytes + owner->limits.maxBodyBytes + 4096),
        owner_(std::move(owner)) {
    owner_->sessions.insert(this);
    ++owner_->budget.open;
  }
  ~Session() {
    owner_->sessions.erase(this);
    --owner_->budget.open;
  }

  void start() {
    ErrorCode ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    readRequest();
  }

  void close() {
    ErrorCode ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void readRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(owner_->limits.maxHeaderBytes));
    parser_->body_limit(owner_->limits.maxBodyBytes);
    stream_.expires_after(owner_->limits.readTimeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](ErrorCode ec, size_t) { self->onRead(ec); });
  }

  static int statusForReadError(const ErrorCode& ec) {
    if (ec == bhttp::error::header_limit) return 431;
    if (ec == bhttp::error::body_limit || ec == bhttp::error::buffer_overflow) return 413;
    // The client went away or was too slow: nobody to answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message) return 0;
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category()) return 400;
    return 0;
  }

  void onRead(ErrorCode ec) {
    if (owner_->closed) return;
    if (ec) {
      int status = statusForReadError(ec);
      if (status == 0) {
        close();
        return;
      }
      Response r;
      r.status = status;
      r.headers = {{"Content-Type", "text/plain; charset=utf-8"}};
      r.body = bhttp::obsolete_reason(bhttp::int_to_status(status)).to_string() + "\n";
      reply(std::move(r), false, false, 11, true);
      return;
    }
    auto& req = parser_->get();
    Request in;
    in.method = std::string(req.method_string());
    in.target = std::string(req.target());
    for (const auto& f : req) in.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    in.body = std::move(req.body());
    Response out;
    try {
      out = owner_->handler(in);
    } catch (const std::exception& e) {
      LOG(ERROR) << "http " << owner_->name << " " << in.method << " " << in.target << ": " << e.what();
      out = Response{500, {{"Content-Type", "text/plain; charset=utf-8"}}, "Internal Server Error\n"};
    }
    reply(std::move(out), req.keep_alive(), req.method() == bhttp::verb::head, req.version(), false);
  }

  // After an error reply the request's unread bytes are drained before closing: closing a socket
  // with unread data sends a reset, which can destroy the reply before the client reads it.
  void reply(Response r, bool keepAlive, bool head, unsigned version, bool drainAfter) {
    res_ = {};
    res_.version(version == 10 ? 10 : 11);
    res_.result(r.status);
    for (const auto& [name, value] : r.headers) res_.insert(beast::string_view(name), beast::string_view(value));
    res_.body() = std::move(r.body);
    res_.keep_alive(keepAlive);
    try {
      res_.prepare_payload();
    } catch (const std::exception& e) {  // e.g. a body on a 204
      LOG(ERROR) << "http " << owner_->name << ": bad response from handler: " << e.what();
      res_ = bhttp::response<bhttp::string_body>(bhttp::status::internal_server_error, res_.version());
      res_.keep_alive(false);
      res_.prepare_payload();
    }
    if (head) res_.body().clear();  // Content-Length stays that of the GET body
    stream_.expires_after(owner_->limits.writeTimeout);
    bhttp::async_write(stream_, res_, [self = shared_from_this(), drainAfter](ErrorCode ec, size_t) {
      if (ec || self->owner_->closed) return self->close();
      if (drainAfter) return self->drainThenClose();
      if (!self->res_.keep_alive()) return self->close();
      self->readRequest();
    });
  }

  void drainThenClose() {
    ErrorCode ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(1));
    drain();
  }

  void drain() {
    stream_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](ErrorCode ec, size_t n) {
      self->drained_ += n;
      if (ec || self->owner_->closed || self->drained_ > 256 * 1024) return self->close();
      self->drain();
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> res_;  // alive until its write completes
  std::array<char, 4096> scratch_;
  size_t drained_ = 0;
  std::shared_ptr<Listener> owner_;
};

void Listener::accept() {
  acceptor.async_accept([self = shared_from_this()](ErrorCode ec, tcp::socket socket) {
    if (self->closed) return;
    if (ec) {
      LOG_EVERY_N(WARNING, 50) << "http " << self->name << ": accept: " << ec.message();
      self->retry.expires_after(std::chrono::milliseconds(100));
      self->retry.async_wait([self](const ErrorCode& e) {
        if (!e && !self->closed) self->accept();
      });
      return;
    }
    if (self->sessions.size() >= self->limits.maxConnections) {
      LOG_EVERY_N(WARNING, 100) << "http " << self->name << ": " << self->sessions.size()
                                << " connections open; refusing more";
      socket.close(ec);
    } else if (self->budget.open >= self->budget.max) {
      LOG_EVERY_N(WARNING, 100) << "http " << self->name << ": " << self->budget.open
                                << " connections open on all ports; refusing more";
      socket.close(ec);
    } else {
      std::make_shared<Session>(std::move(socket), self)->start();
    }
    self->accept();
  });
}

void Listener::close() {
  closed = true;
  ErrorCode ignored;
  acceptor.close(ignored);
  retry.cancel();
  // Closing cancels each session's pending operation; its handler sees `closed` and lets go.
  for (Session* s : std::vector<Session*>(sessions.begin(), sessions.end())) s->close();
  handler = nullptr;  // whatever it captured is released now, not when the last session ends
}

bool openAndListen(tcp::acceptor& a, const tcp::endpoint& ep, bool v6only, ErrorCode& ec, const char** step) {
  *step = "socket";
  a.open(ep.protocol(), ec);
  if (ec) return false;
  // Lets a restarted daemon bind again while old connections sit in TIME_WAIT; it does not let
  // two sockets listen on one port.
  a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec && ep.address().is_v6()) a.set_option(asio::ip::v6_only(v6only), ec);
  if (!ec) {
    *step = "bind";
    a.bind(ep, ec);
  }
  if (!ec) {
    *step = "listen";
    a.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    ErrorCode ignored;
    a.close(ignored);
  }
  return !ec;
}

bool bindListener(tcp::acceptor& a, const std::string& address, int port, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return false;
  };
  if (port < 0 || port > 65535) return fail("invalid port " + std::to_string(port));
  auto p = static_cast<unsigned short>(port);
  ErrorCode ec;
  const char* step = "";
  if (address.empty()) {
    // Both families on one socket, as Go's net.Listen does for ":port".
    if (openAndListen(a, tcp::endpoint(tcp::v6(), p), false, ec, &step)) return true;
    if (ec == asio::error::address_family_not_supported || ec == boost::system::errc::address_not_available) {
      if (openAndListen(a, tcp::endpoint(tcp::v4(), p), false, ec, &step)) return true;
    }
  } else {
    auto ip = asio::ip::make_address(address, ec);
    if (ec) return fail("listen " + endpointText(address, port) + ": not an IP address");
    if (openAndListen(a, tcp::endpoint(ip, p), true, ec, &step)) return true;
  }
  return fail(std::string(step) + " " + endpointText(address, port) + ": " + ec.message());
}

}  // namespace

struct Server::Impl {
  std::shared_ptr<Listener> listener;
};

Server::Server(Loop& loop, std::unique_ptr<Impl> impl, std::string address, int port)
    : loop_(loop), impl_(std::move(impl)), address_(std::move(address)), port_(port) {}

std::unique_ptr<Server> Server::listen(Loop& loop, const std::string& address, int port, Handler handler,
                                       std::string* error, const Limits& limits) {
  std::unique_ptr<Server> out;
  loop.call([&] {
    auto l = std::make_shared<Listener>(loop.impl_->io, loop.impl_->budget, std::move(handler), limits,
                                        endpointText(address, port));
    if (!bindListener(l->acceptor, address, port, error)) return;
    ErrorCode ec;
    int bound = l->acceptor.local_endpoint(ec).port();
    l->name = endpointText(address, bound);
    l->accept();
    out.reset(new Server(loop, std::make_unique<Impl>(Impl{l}), address, bound));
  });
  return out;
}

Server::~Server() {
  loop_.call([this] {
    impl_->listener->close();
    impl_->listener.reset();
  });
}

}  // namespace kpn::http
