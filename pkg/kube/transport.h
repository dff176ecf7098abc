// The reflectors' view of HTTP: GET a whole body, or GET and stream the body as it arrives; and
// the event recorder's: one request with a body (POST, PATCH). The cpprestsdk implementation
// (cpprest_transport.cc, the only file that includes cpprest headers) adds TLS, authentication,
// the rate limit and the user agent; tests use a scripted fake.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kpn::kube {

struct HttpResult {
  int status = 0;           // 0: no HTTP answer (connect, TLS, timeout, cancelled); see error
  std::string body;         // get(): the body; stream(): the body when status != 200
  std::string error;        // transport-level failure, in words
  int retryAfterSeconds = 0;  // from a 429/503's Retry-After
  bool cancelled = false;   // ended by cancel(), not by the server
};

// Told once per request when its status is known (0: no HTTP answer), with the time to the
// response headers: for client-go's rest_client_* metrics. Any thread.
using RequestHook = std::function<void(const char* method, const std::string& host, int status, double seconds)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // `target` is the path and query ("/api/v1/services?limit=500"), already escaped.
  virtual HttpResult get(const std::string& target) = 0;
  // Calls onData with the body bytes as they arrive (200 only) until the body ends, onData
  // returns false, or cancel() is called. A clean end of the body has status 200 and no error; a
  // connection lost mid-body has status 200 and an error.
  virtual HttpResult stream(const std::string& target, const std::function<bool(std::string_view)>& onData) = 0;
  // One request with a JSON body ("POST", "PATCH"; `contentType` as the API server wants it for
  // the method), rate-limited and authenticated like the others; the answer's body in r.body.
  virtual HttpResult send(const std::string& method, const std::string& target, const std::string& body,
                          const std::string& contentType) = 0;
  // The server said 401: credentials that can change (a token file) are read again before the
  // next request.
  virtual void credentialsRejected() = 0;
  // Ends every request in flight and makes later ones fail at once (shutdown).
  virtual void cancel() = 0;
  // Where requests go, for log lines.
  virtual std::string server() const = 0;
};

}  // namespace kpn::kube
