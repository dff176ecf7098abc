#include "pkg/kube/rate_limiter.h"

#include <algorithm>

namespace kpn::kube {

RateLimiter::RateLimiter(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)), last_(Clock::now()) {}

void RateLimiter::refill(Clock::time_point now) {
  if (now <= last_) return;
  tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * qps_);
  last_ = now;
}

RateLimiter::Clock::duration RateLimiter::waitTime(Clock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  if (qps_ <= 0) return Clock::duration::zero();
  refill(now);
  if (tokens_ >= 1) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((1 - tokens_) / qps_));
}

bool RateLimiter::acquire() {
  std::unique_lock<std::mutex> lk(mu_);
  if (qps_ <= 0) return !stopped_;
  for (;;) {
    if (stopped_) return false;
    refill(Clock::now());
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return true;
    }
    auto wait = std::chrono::duration<double>((1 - tokens_) / qps_);
    cv_.wait_for(lk, wait);
  }
}

void RateLimiter::stop() {
  std::lock_guard<std::mutex> lk(mu_);
  stopped_ = true;
  cv_.notify_all();
}

}  // namespace kpn::kube
