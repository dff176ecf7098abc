// One of the two translation units that include Boost (Asio and Beast; Asio also in pkg/localhost/proxy.cc).
#include "pkg/http/server.h"

#include <glog/logging.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <future>
#include <set>
#include <thread>
#include <unordered_map>

#include "pkg/http/admission.h"

namespace kpn::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

namespace {

class Session;

// What a Loop's servers share; touched only on the loop thread.
struct LoopState {
  explicit LoopState(size_t budget) : admission(AdmissionLimits::forBudget(budget)) {}
  Admission admission;
  std::unordered_map<Admission::Id, Session*> sessions;  // every open one, to evict by id
  Admission::Id nextId = 1;
  size_t peakSinceTrim = 0;  // connections open at most since memory was last given back
  uint64_t refused = 0, evicted = 0;
  // Where drained bytes go. Nobody reads them, and every read runs on the loop thread: one buffer
  // serves every connection.
  std::array<char, 16 * 1024> scratch;
};

// After this many connections closed, freed memory goes back to the system (malloc_trim): the
// sessions of a flood are spread over the heap, between long-lived objects, so glibc would keep
// their pages.
constexpr size_t kTrimAfterClosed = 256;

// Asio keeps a record (its epoll descriptor state) for every socket it has had open at once and
// never frees it: it reuses them. Made one by one as connections arrive, they would sit one per
// page among the sessions' memory and keep those pages from going back to the system after a
// flood. Made all at once on a thread of their own, they sit together, away from the loop
// thread's sessions: n sockets opened and closed again (the descriptors are back before return).
// Not on the constructing thread, nor on the loop thread (which starting servers wait for): at
// 10 000 records it takes ~340 ms, which came before the first sync of every start.
void reserveSocketRecords(asio::io_context& io, size_t n) {
  // Idle priority: the records are for a flood that may come later, while the first sync (render
  // here, libnftables' parse in the helper) wants both CPUs of a small node now. At normal
  // priority this thread took a third of a CPU through every cold start's sync.
  sched_param idle{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
  std::vector<tcp::socket> sockets;
  sockets.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ErrorCode ec;
    tcp::socket s(io);
    s.open(tcp::v4(), ec);
    if (ec) break;  // out of descriptors: the rest are made as needed
    sockets.push_back(std::move(s));
  }
}

}  // namespace

struct Loop::Impl {
  explicit Impl(size_t maxConnections) : state(maxConnections) {}
  void armTrim() {
    trim.expires_after(std::chrono::seconds(1));
    trim.async_wait([this](const ErrorCode& ec) {
      if (ec) return;
      size_t open = state.admission.open() + state.admission.openLocal();
      if (state.peakSinceTrim >= open + kTrimAfterClosed) {
        malloc_trim(0);
        state.peakSinceTrim = open;
      }
      armTrim();
    });
  }
  LoopState state;  // first: destroyed after io, whose pending handlers hold sessions
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  asio::steady_timer trim{io};
  std::thread thread;
  std::thread reserver;  // makes the socket records (reserveSocketRecords), then ends
};

Loop::Loop(size_t maxConnections) : impl_(std::make_unique<Impl>(maxConnections)) {
  const AdmissionLimits& l = impl_->state.admission.limits();
  impl_->reserver = std::thread(reserveSocketRecords, std::ref(impl_->io), l.total + l.local + 64);  // and the listeners
  impl_->armTrim();
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

void Loop::waitForSocketRecords() {
  if (impl_->reserver.joinable()) impl_->reserver.join();
}

Loop::~Loop() {
  waitForSocketRecords();
  impl_->work.reset();
  impl_->io.stop();
  impl_->thread.join();
}

bool Loop::onLoopThread() const { return impl_->io.get_executor().running_in_this_thread(); }

size_t Loop::openConnections() {
  size_t n = 0;
  call([&] { n = impl_->state.admission.open() + impl_->state.admission.openLocal(); });
  return n;
}

LoopStats Loop::stats() {
  LoopStats st;
  call([&] {
    const LoopState& s = impl_->state;
    st = {s.admission.open(), s.admission.openLocal(), s.admission.sources(), s.refused, s.evicted};
  });
  return st;
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

Address16 bytesOf(const asio::ip::address& a) {
  if (a.is_v4()) return asio::ip::make_address_v6(asio::ip::v4_mapped, a.to_v4()).to_bytes();
  return a.to_v6().to_bytes();
}

// A listening socket and its connections. Lives on the loop thread; shared by its Server and
// its sessions, so that a session's last completion handler can still run after close().
struct Listener : std::enable_shared_from_this<Listener> {
  Listener(asio::io_context& io, LoopState& state, Handler handler, const Limits& limits, std::string name)
      : acceptor(io), retry(io), state(state), handler(std::move(handler)), limits(limits), name(std::move(name)) {}
  void accept();
  void admit(tcp::socket socket);
  void close();

  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after a failed accept (EMFILE...): accepting again at once would spin
  LoopState& state;          // the Loop's, which outlives every listener and session
  Handler handler;
  Limits limits;
  std::string name;  // "[::1]:8080", for logs
  bool closed = false;
  std::set<Session*> sessions;
};

// Closes a connection with a reset: nothing of it lingers in the kernel (no FIN_WAIT, no
// TIME_WAIT), and the client learns at once.
void resetAndClose(tcp::socket& s) {
  ErrorCode ignored;
  s.set_option(asio::socket_base::linger(true, 0), ignored);
  s.close(ignored);
}

// One connection. Waiting for a request it holds no buffer (a readiness wait, no read); a request
// is read up to the end of its header into a buffer of at most maxHeaderBytes, answered, and
// everything but the socket is freed again.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Listener> owner, Admission::Id id)
      : socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        buffer_(owner->limits.maxHeaderBytes + 1024),  // the parser's header limit speaks first
        owner_(std::move(owner)),
        id_(id) {
    owner_->sessions.insert(this);
    owner_->state.sessions.emplace(id_, this);
  }
  ~Session() {
    owner_->sessions.erase(this);
    owner_->state.sessions.erase(id_);
    owner_->state.admission.closed(id_);
  }

  void start() {
    ErrorCode ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    waitForRequest();
  }

  // Closes now: gracefully (FIN) after a reply, between requests, or when the client left; with
  // a reset when cut off mid-request (a timeout, or evicted to make room), which frees the socket
  // at once. A reset right after a reply could destroy it before the client reads it.
  void close() { closeNow(waiting_ || answered_); }
  void closeNow(bool graceful) {
    if (closed_) return;
    closed_ = true;
    owner_->state.admission.closed(id_);
    deadline_.cancel();
    if (!graceful) return resetAndClose(socket_);
    ErrorCode ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  const Limits& limits() const { return owner_->limits; }

  // Cuts the connection when the deadline passes; each call replaces the previous deadline.
  void armDeadline(std::chrono::milliseconds d) {
    ++deadlineGen_;
    deadline_.expires_after(d);
    deadline_.async_wait([self = shared_from_this(), gen = deadlineGen_](const ErrorCode& ec) {
      if (!ec && gen == self->deadlineGen_) self->close();  // a replaced deadline's late wake-up is not it
    });
  }

  void waitForRequest() {
    parser_.reset();
    armDeadline(limits().readTimeout);  // for the whole request, the wait for its first byte included
    if (buffer_.size() > 0) return readHeader();  // a pipelined request is here already
    waiting_ = true;
    owner_->state.admission.idle(id_, std::chrono::steady_clock::now());
    buffer_.shrink_to_fit();  // frees it: an idle connection holds no buffer
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const ErrorCode& ec) {
      if (self->closed_) return;
      if (ec) return self->close();
      self->readHeader();
    });
  }

  void readHeader() {
    waiting_ = false;
    answered_ = false;
    owner_->state.admission.busy(id_, std::chrono::steady_clock::now());
    parser_ = std::make_unique<bhttp::request_parser<bhttp::empty_body>>();
    parser_->header_limit(static_cast<uint32_t>(limits().maxHeaderBytes));
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             [self = shared_from_this()](ErrorCode ec, size_t) { self->onHeader(ec); });
  }

  static int statusForReadError(const ErrorCode& ec) {
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) return 431;
    // A Content-Length (over the parser's body limit, or any: it reads no body).
    if (ec == bhttp::error::unexpected_body || ec == bhttp::error::body_limit) return 413;
    // The client went away or was too slow: nobody to answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message) return 0;
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category()) return 400;
    return 0;
  }

  static Response plain(int status) {
    return {status, {{"Content-Type", "text/plain; charset=utf-8"}},
            bhttp::obsolete_reason(bhttp::int_to_status(status)).to_string() + "\n"};
  }

  void onHeader(ErrorCode ec) {
    if (closed_) return;
    if (ec) {
      int status = statusForReadError(ec);
      if (status == 0) return closeNow(true);  // nobody to answer
      return reply(plain(status), false, false, 11, true);
    }
    auto& req = parser_->get();
    // Every endpoint here is a GET: a body is never read, so it cannot cost memory.
    if (parser_->chunked() || parser_->content_length().value_or(0) > 0)
      return reply(plain(413), false, false, req.version(), true);
    Request in;
    in.method = std::string(req.method_string());
    in.target = std::string(req.target());
    for (const auto& f : req) in.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
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
    res_ = std::make_unique<bhttp::response<bhttp::string_body>>();
    auto& res = *res_;
    res.version(version == 10 ? 10 : 11);
    res.result(r.status);
    for (const auto& [name, value] : r.headers) res.insert(beast::string_view(name), beast::string_view(value));
    res.body() = std::move(r.body);
    res.keep_alive(keepAlive && !drainAfter);
    try {
      res.prepare_payload();
    } catch (const std::exception& e) {  // e.g. a body on a 204
      LOG(ERROR) << "http " << owner_->name << ": bad response from handler: " << e.what();
      res = bhttp::response<bhttp::string_body>(bhttp::status::internal_server_error, res.version());
      res.keep_alive(false);
      res.prepare_payload();
    }
    if (head) res.body().clear();  // Content-Length stays that of the GET body
    armDeadline(limits().writeTimeout);
    bhttp::async_write(socket_, res, [self = shared_from_this(), drainAfter](ErrorCode ec, size_t) {
      if (self->closed_) return;
      if (ec) return self->closeNow(false);
      self->answered_ = true;
      bool keep = self->res_->keep_alive();
      self->res_.reset();
      if (drainAfter) return self->drainThenClose();
      if (!keep) return self->close();
      self->waitForRequest();
    });
  }

  void drainThenClose() {
    ErrorCode ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    parser_.reset();
    buffer_.clear();
    buffer_.shrink_to_fit();
    armDeadline(std::chrono::seconds(1));
    drain();
  }

  void drain() {
    socket_.async_read_some(asio::buffer(owner_->state.scratch), [self = shared_from_this()](ErrorCode ec, size_t n) {
      if (self->closed_) return;
      self->drained_ += n;
      if (ec) return self->closeNow(true);  // the client read the reply and closed
      if (self->drained_ > 256 * 1024) return self->closeNow(false);
      self->drain();
    });
  }

  tcp::socket socket_;
  asio::steady_timer deadline_;
  uint64_t deadlineGen_ = 0;
  beast::flat_buffer buffer_;  // allocated while a request is read, freed while waiting for one
  std::unique_ptr<bhttp::request_parser<bhttp::empty_body>> parser_;  // while a request is read
  std::unique_ptr<bhttp::response<bhttp::string_body>> res_;         // alive until its write completes
  size_t drained_ = 0;
  std::shared_ptr<Listener> owner_;
  Admission::Id id_;
  bool waiting_ = false;   // for a request's first byte
  bool answered_ = false;  // the last request's reply is written
  bool closed_ = false;
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
    self->admit(std::move(socket));
    self->accept();
  });
}

void Listener::admit(tcp::socket socket) {
  ErrorCode e1, e2;
  tcp::endpoint remote = socket.remote_endpoint(e1), local = socket.local_endpoint(e2);
  if (e1 || e2) return resetAndClose(socket);  // gone already
  Admission::Id id = state.nextId++;
  Admission::Decision d = state.admission.admit(id, peerOf(bytesOf(remote.address()), bytesOf(local.address())),
                                                std::chrono::steady_clock::now());
  for (Admission::Id victim : d.evict) {
    auto it = state.sessions.find(victim);
    if (it == state.sessions.end()) continue;
    ++state.evicted;
    LOG_EVERY_N(INFO, 1000) << "http " << name << ": closing a connection to make room ("
                            << state.admission.open() << " open from outside, "
                            << state.admission.sources() << " sources)";
    it->second->close();
  }
  if (!d.admitted) {
    ++state.refused;
    LOG_EVERY_N(WARNING, 1000) << "http " << name << ": refusing a connection from " << remote.address()
                               << ": it holds its share (" << state.admission.limits().perSource
                               << ") or all " << state.admission.limits().total << " are held";
    return resetAndClose(socket);
  }
  std::make_shared<Session>(std::move(socket), shared_from_this(), id)->start();
  state.peakSinceTrim = std::max(state.peakSinceTrim, state.admission.open() + state.admission.openLocal());
}

void Listener::close() {
  closed = true;
  ErrorCode ignored;
  acceptor.close(ignored);
  retry.cancel();
  // Closing cancels each session's pending operation; its handler sees it closed and lets go.
  for (Session* s : std::vector<Session*>(sessions.begin(), sessions.end())) s->closeNow(true);
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
    auto l = std::make_shared<Listener>(loop.impl_->io, loop.impl_->state, std::move(handler), limits,
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
