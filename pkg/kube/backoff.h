// Exponential backoff with jitter for reconnecting to the API server: every failed attempt doubles
// the delay up to a ceiling, and a random spread keeps a fleet of nodes from retrying in lockstep
// after an API server restart. Pure: the caller sleeps, and supplies the randomness in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace kpn::kube {

class Backoff {
 public:
  using Duration = std::chrono::milliseconds;
  Backoff(Duration initial, Duration max, double jitter = 0.5, uint64_t seed = std::random_device{}())
      : initial_(initial), max_(max), jitter_(jitter), rng_(seed) {}

  // The delay before the next attempt: initial, 2x, 4x ... up to max, each stretched by a random
  // factor in [1, 1 + jitter].
  Duration next();
  // After a success the next failure starts from the initial delay again.
  void reset() { failures_ = 0; }

 private:
  Duration initial_, max_;
  double jitter_;
  std::mt19937_64 rng_;
  int failures_ = 0;
};

}  // namespace kpn::kube
