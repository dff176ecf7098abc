#include "pkg/kube/backoff.h"

#include <algorithm>

namespace kpn::kube {

Backoff::Duration Backoff::next() {
  double base = static_cast<double>(initial_.count());
  for (int i = 0; i < failures_ && base < max_.count(); i++) base *= 2;
  base = std::min(base, static_cast<double>(max_.count()));
  failures_ = std::min(failures_ + 1, 62);
  double factor = 1.0 + std::uniform_real_distribution<double>(0.0, jitter_)(rng_);
  return Duration(static_cast<int64_t>(base * factor));
}

}  // namespace kpn::kube
