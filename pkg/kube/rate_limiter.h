// A token bucket like client-go's (--kube-api-qps, --kube-api-burst): up to `burst` requests at
// once, then `qps` per second. Shared by every request the daemon sends to the API server, so a
// flapping network cannot turn the node into a load generator against the control plane.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kpn::kube {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // qps <= 0 means no limit.
  RateLimiter(double qps, int burst);

  // Takes one token, waiting as long as needed. Returns false (without a token) when stop() was
  // called while waiting.
  bool acquire();
  // How long acquire() would wait now (for tests and logs); takes nothing.
  Clock::duration waitTime(Clock::time_point now);
  void stop();

 private:
  void refill(Clock::time_point now);
  const double qps_;
  const double burst_;
  double tokens_;
  Clock::time_point last_;
  bool stopped_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace kpn::kube
