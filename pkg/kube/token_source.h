// The bearer token, kept fresh: a token file (a projected service-account token, rotated by the
// kubelet about hourly) is read again every minute and right after the server rejected the token,
// so that new requests always carry the current one. Thread-safe.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace kpn::kube {

class TokenSource {
 public:
  using Clock = std::chrono::steady_clock;
  TokenSource(std::string fixedToken, std::string tokenFile, Clock::duration refresh = std::chrono::minutes(1));

  // "" when there is no token at all.
  std::string token(Clock::time_point now = Clock::now());
  // The server said 401: read the file again before the next request.
  void invalidate();

 private:
  const std::string fixed_, file_;
  const Clock::duration refresh_;
  std::mutex mu_;
  std::string cached_;
  Clock::time_point readAt_{};
  bool stale_ = true;
};

}  // namespace kpn::kube
