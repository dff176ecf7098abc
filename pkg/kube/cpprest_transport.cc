// The only file that includes cpprest: see cpprest_transport.h.
#include "pkg/kube/cpprest_transport.h"

#include <glog/logging.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>
#include <cpprest/http_client.h>
#include <pplx/threadpool.h>

#include <mutex>
#include <set>

#include "pkg/kube/connect_diagnose.h"
#include "pkg/kube/rate_limiter.h"
#include "pkg/kube/tls_diagnose.h"
#include "pkg/kube/token_source.h"

namespace kpn::kube {
namespace {

namespace http = web::http;
namespace client = web::http::client;

// cpprest's default pool has 40 threads; three streams and a list need a handful. Must run before
// the first cpprest object exists.
void initThreadPoolOnce() {
  static std::once_flag once;
  std::call_once(once, [] { crossplat::threadpool::initialize_with_threads(4); });
}

// cpprest resolves an IPv6 literal host with its brackets ("[fd00::1]"), which fails; a uri
// built with the bare address resolves, and still verifies the certificate against the IP.
web::uri baseUri(const std::string& server) {
  web::uri u(server);
  const std::string& host = u.host();
  if (host.size() < 2 || host.front() != '[') return u;
  web::uri_builder b(u);
  b.set_host(host.substr(1, host.size() - 2));
  return b.to_uri();
}

class CpprestTransport final : public Transport {
 public:
  CpprestTransport(const ClientConfig& cfg, TransportTimeouts t, RequestHook onRequest)
      : cfg_(cfg), tokens_(cfg.token, cfg.tokenFile), limiter_(cfg.qps, cfg.burst), onRequest_(std::move(onRequest)) {
    initThreadPoolOnce();
    web::uri u(cfg.server);
    host_ = u.host() + (u.port() > 0 ? ":" + std::to_string(u.port()) : "");
    web::uri base = baseUri(cfg.server);
    requests_ = std::make_unique<client::http_client>(base, clientConfig(t.request));
    watches_ = std::make_unique<client::http_client>(base, clientConfig(t.watch));
  }

  HttpResult get(const std::string& target) override {
    HttpResult r;
    send(*requests_, http::methods::GET, target, nullptr, r,
         [&](http::http_response& resp, pplx::cancellation_token_source& self) { readWholeBody(resp, r, self); });
    return r;
  }

  HttpResult send(const std::string& method, const std::string& target, const std::string& body,
                  const std::string& contentType) override {
    HttpResult r;
    const Body b{body, contentType};
    send(*requests_, method, target, &b, r,
         [&](http::http_response& resp, pplx::cancellation_token_source& self) { readWholeBody(resp, r, self); });
    return r;
  }

  HttpResult stream(const std::string& target, const std::function<bool(std::string_view)>& onData) override {
    HttpResult r;
    send(*watches_, http::methods::GET, target, nullptr, r, [&](http::http_response& resp, pplx::cancellation_token_source& self) {
      if (resp.status_code() != 200) return readWholeBody(resp, r, self);  // an error's Status
      readBody(resp, [&](std::string_view data) {
        if (onData(data)) return true;
        // The consumer is done with this stream (it will relist or stop): drop the connection
        // rather than let cpprest buffer the rest of it.
        self.cancel();
        return false;
      });
    });
    return r;
  }

  void credentialsRejected() override { tokens_.invalidate(); }

  void cancel() override {
    limiter_.stop();
    std::lock_guard<std::mutex> lk(mu_);
    cancelled_ = true;
    for (auto* cts : inFlight_) cts->cancel();
  }

  std::string server() const override { return cfg_.server; }

 private:
  // A list bigger than this is refused rather than risking the node's memory (10k services with
  // 10k EndpointSlices of 10 endpoints are ~30 MiB).
  static constexpr size_t kMaxBody = size_t(1) << 30;

  // Hands the body to onData as it arrives, until it ends or onData returns false.
  template <class OnData>
  static void readBody(http::http_response& resp, OnData&& onData) {
    auto buf = resp.body().streambuf();
    using Traits = decltype(buf)::traits;
    std::vector<char> chunk(64 * 1024);
    for (;;) {
      // getn(n) waits until n bytes are there, which could hold an event back for minutes on a
      // quiet watch: wait for one byte with getc (it does not consume it), then take exactly
      // what has arrived.
      size_t avail = buf.in_avail();
      if (avail == 0) {
        if (buf.getc().get() == Traits::eof()) return;  // the body ended cleanly
        continue;
      }
      size_t n = buf.getn(reinterpret_cast<uint8_t*>(chunk.data()), std::min(avail, chunk.size())).get();
      if (n == 0 || !onData(std::string_view(chunk.data(), n))) return;
    }
  }

  // The body into r.body, up to kMaxBody; beyond that the request is dropped and r says why.
  static void readWholeBody(http::http_response& resp, HttpResult& r, pplx::cancellation_token_source& self) {
    auto length = resp.headers().content_length();
    if (length > 0 && length <= kMaxBody) r.body.reserve(length);
    readBody(resp, [&](std::string_view data) {
      if (r.body.size() + data.size() > kMaxBody) {
        r.error = "response body larger than " + std::to_string(kMaxBody >> 20) + " MiB; not reading it";
        r.status = 0;
        std::string().swap(r.body);
        self.cancel();
        return false;
      }
      r.body.append(data);
      return true;
    });
  }

  client::http_client_config clientConfig(std::chrono::seconds timeout) const {
    client::http_client_config c;
    c.set_timeout(timeout);
    if (cfg_.insecureSkipTlsVerify) c.set_validate_certificates(false);
    ClientConfig tls = cfg_;
    c.set_ssl_context_callback([tls](boost::asio::ssl::context& ctx) {
      if (!tls.caPem.empty()) {
        // Trust exactly the configured CA, as client-go does, not the system's store besides.
        SSL_CTX_set_cert_store(ctx.native_handle(), X509_STORE_new());
        ctx.add_certificate_authority(boost::asio::buffer(tls.caPem));
      }
      if (!tls.clientCertPem.empty()) {
        ctx.use_certificate_chain(boost::asio::buffer(tls.clientCertPem));
        ctx.use_private_key(boost::asio::buffer(tls.clientKeyPem), boost::asio::ssl::context::pem);
      }
    });
    return c;
  }

  struct Body {
    const std::string& text;
    const std::string& contentType;
  };

  // Sends one request (rate-limited, authenticated; `body` null for a GET) and lets `onResponse`
  // read the answer's body. Fills r.
  template <class OnResponse>
  void send(client::http_client& c, const std::string& method, const std::string& target, const Body* body,
            HttpResult& r, OnResponse&& onResponse) {
    pplx::cancellation_token_source cts;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (cancelled_) {
        r.cancelled = true;
        return;
      }
      inFlight_.insert(&cts);
    }
    struct Unregister {
      CpprestTransport* t;
      pplx::cancellation_token_source* cts;
      ~Unregister() {
        std::lock_guard<std::mutex> lk(t->mu_);
        t->inFlight_.erase(cts);
      }
    } unregister{this, &cts};
    if (!limiter_.acquire()) {
      r.cancelled = true;
      return;
    }
    http::http_request req(method);
    req.set_request_uri(target);
    if (body) req.set_body(body->text, body->contentType);
    req.headers().add(http::header_names::accept, "application/json");
    req.headers().add(http::header_names::user_agent, cfg_.userAgent);
    if (!cfg_.tlsServerName.empty()) req.headers().add(http::header_names::host, cfg_.tlsServerName);
    std::string bearer = tokens_.token();
    if (!bearer.empty()) req.headers().add(http::header_names::authorization, "Bearer " + bearer);
    auto started = std::chrono::steady_clock::now();
    auto observe = [&] {
      if (onRequest_ && !r.cancelled)
        onRequest_(method.c_str(), host_, r.status, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    };
    try {
      http::http_response resp = c.request(req, cts.get_token()).get();
      r.status = resp.status_code();
      observe();
      auto ra = resp.headers().find("Retry-After");
      if (ra != resp.headers().end()) r.retryAfterSeconds = std::atoi(ra->second.c_str());
      onResponse(resp, cts);
    } catch (const pplx::task_canceled&) {
      r.cancelled = isCancelled();
      if (!r.cancelled) r.error = "GET " + urlOf(target) + ": request cancelled";
    } catch (const http::http_exception& e) {
      failed(r, target, e.what(), e.error_code(), observe);
    } catch (const boost::system::system_error& e) {
      failed(r, target, e.what(), std::error_code(e.code().value(), std::generic_category()), observe);
    } catch (const std::exception& e) {
      failed(r, target, e.what(), {}, observe);
    }
  }

  // The request's URL without its query (resourceVersion, continue tokens), for error lines.
  std::string urlOf(const std::string& target) const { return cfg_.server + target.substr(0, target.find('?')); }

  // r.error for a request that failed: the URL, then what went wrong in words an operator can act
  // on. cpprest's own words are generic ("Failed to connect to any resolved endpoint", "Error in
  // SSL handshake") and its error code for a refused connection says "host unreachable": a
  // connection or TLS failure is diagnosed once more here, naming the address and the errno.
  // `observe` counts a request without an HTTP answer (status 0), before the diagnosis takes time.
  template <class Observe>
  void failed(HttpResult& r, const std::string& target, const std::string& what, std::error_code ec, Observe&& observe) {
    r.cancelled = isCancelled();
    if (r.cancelled) return;
    if (r.status == 0) observe();
    std::string why = what;
    if (ec && what.find(ec.message()) == std::string::npos) why += ": " + ec.message() + " (" + std::to_string(ec.value()) + ")";
    if (r.status == 0 && what.find("handshake") != std::string::npos && !cfg_.insecureSkipTlsVerify)
      why = "TLS handshake failed: " + diagnoseTls(cfg_) + " (" + what + ")";
    else if (r.status == 0 && (what.find("connect") != std::string::npos || what.find("resolve") != std::string::npos))
      why = diagnoseConnect(cfg_.server) + " (" + what + ")";
    r.error = "GET " + urlOf(target) + ": " + why;
  }

  bool isCancelled() {
    std::lock_guard<std::mutex> lk(mu_);
    return cancelled_;
  }

  const ClientConfig cfg_;
  TokenSource tokens_;
  RateLimiter limiter_;
  RequestHook onRequest_;
  std::string host_;  // host:port, as client-go labels its metrics
  std::unique_ptr<client::http_client> requests_, watches_;
  std::mutex mu_;
  std::set<pplx::cancellation_token_source*> inFlight_;  // so that cancel() reaches every request
  bool cancelled_ = false;
};

}  // namespace

std::unique_ptr<Transport> makeCpprestTransport(const ClientConfig& cfg, TransportTimeouts timeouts,
                                                RequestHook onRequest) {
  return std::make_unique<CpprestTransport>(cfg, timeouts, std::move(onRequest));
}

}  // namespace kpn::kube
