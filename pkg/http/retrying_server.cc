#include "pkg/http/retrying_server.h"

#include <glog/logging.h>

#include "pkg/http/bind_address.h"

namespace kpn::http {

RetryingServer::RetryingServer(Loop& loop, std::string what, std::string address, int port, Handler handler)
    : loop_(loop), what_(std::move(what)), address_(std::move(address)), wantPort_(port), handler_(std::move(handler)) {}

std::unique_ptr<RetryingServer> RetryingServer::start(Loop& loop, std::string what, std::string address, int port,
                                                      Handler handler, bool hardFail, std::string* error,
                                                      std::chrono::milliseconds retry) {
  std::unique_ptr<RetryingServer> s(new RetryingServer(loop, std::move(what), std::move(address), port, std::move(handler)));
  std::string why;
  bool ok = false;
  loop.call([&] { ok = s->tryListen(&why); });
  if (ok) return s;
  if (hardFail) {
    *error = s->what_ + " server: " + why + " (bindAddressHardFail: exiting)";
    return nullptr;
  }
  *error = s->what_ + " server: " + why;
  LOG(ERROR) << s->what_ << " server: " << why << "; retrying every "
             << std::chrono::duration_cast<std::chrono::seconds>(retry).count() << " s";
  RetryingServer* self = s.get();
  s->retry_ = std::make_unique<Ticker>(loop, retry, [self] {
    if (self->server_) return;
    std::string e;
    if (self->tryListen(&e)) {
      LOG(INFO) << self->what_ << " server: listening on port " << self->port() << " after " << self->failures_
                << " failed attempts";
    } else if (self->failures_ % 12 == 0) {
      LOG(WARNING) << self->what_ << " server: still failing: " << e;
    }
  });
  return s;
}

bool RetryingServer::tryListen(std::string* error) {
  server_ = Server::listen(loop_, address_, wantPort_, handler_, error);
  if (!server_) {
    ++failures_;
    return false;
  }
  port_.store(server_->port());
  return true;
}

RetryingServer::~RetryingServer() {
  retry_.reset();  // first: its callback touches server_
  loop_.call([this] { server_.reset(); });
}

std::optional<std::string> startConfigured(Loop& loop, const std::string& what, const std::string& field,
                                           const std::string& bindAddress, bool portZeroDisables, Handler handler,
                                           bool hardFail, const BindFailureHook& onBindFailure,
                                           std::unique_ptr<RetryingServer>& server) {
  if (bindAddress.empty()) return std::nullopt;
  std::string err;
  auto a = parseBindAddress(bindAddress, &err);
  if (!a) return field + " " + err;
  if (a->port == 0 && portZeroDisables) return std::nullopt;
  server = RetryingServer::start(loop, what, a->host, a->port, std::move(handler), hardFail, &err);
  if ((!server || !server->listening()) && onBindFailure && !err.empty()) onBindFailure(what, err);
  if (!server) return err;
  if (server->listening()) LOG(INFO) << what << " server listening on " << bindAddress;
  return std::nullopt;
}

}  // namespace kpn::http
