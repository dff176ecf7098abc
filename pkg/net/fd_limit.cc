#include "pkg/net/fd_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kpn::net {

FdLimit raiseFdLimit() {
  FdLimit out;
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
    out.error = std::string("getrlimit: ") + strerror(errno);
    return out;
  }
  if (r.rlim_cur < r.rlim_max) {
    rlimit want{r.rlim_max, r.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
      out.raised = true;
      r = want;
    } else {
      out.error = std::string("setrlimit: ") + strerror(errno);
    }
  }
  out.soft = r.rlim_cur;
  out.hard = r.rlim_max;
  return out;
}

size_t httpConnectionBudget(uint64_t softLimit) {
  constexpr uint64_t kReserve = 256, kMin = 64, kMax = 16384;
  uint64_t share = softLimit > kReserve ? (softLimit - kReserve) / 2 : 0;
  return static_cast<size_t>(std::clamp(share, kMin, kMax));
}

}  // namespace kpn::net
