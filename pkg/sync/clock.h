// Time as the sync loop and the health state see it: a monotonic clock for deciding when to sync
// and a wall clock for what is reported (timestamps in metrics and /healthz bodies). Injected, so
// that tests step time by hand instead of sleeping.
#pragma once

#include <chrono>

namespace kpn::sync {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

// Milliseconds of the steady clock since `t`, for the phase timings of a sync (render, diff,
// commit) that are reported, not decided on.
inline double msSince(SteadyTime t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() const = 0;
  virtual WallTime wallNow() const = 0;
};

class RealClock : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wallNow() const override { return std::chrono::system_clock::now(); }
};

// Moves when told, and by readStep on every now() (time passes while code runs: a decision
// that reads the clock twice sees two times); both clocks move together.
class FakeClock : public Clock {
 public:
  SteadyTime now() const override {
    steady_ += readStep;
    return steady_;
  }
  WallTime wallNow() const override { return wall_; }
  void advance(std::chrono::nanoseconds d) {
    steady_ += d;
    wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
  }
  std::chrono::nanoseconds readStep{0};

 private:
  mutable SteadyTime steady_ = SteadyTime{} + std::chrono::hours(1);
  WallTime wall_ = WallTime{} + std::chrono::seconds(1764720000);  // 2025-12-03T00:00:00Z
};

}  // namespace kpn::sync
