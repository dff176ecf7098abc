#include "pkg/kube/token_source.h"

#include <glog/logging.h>

#include "pkg/kube/client_config.h"

namespace kpn::kube {

TokenSource::TokenSource(std::string fixedToken, std::string tokenFile, Clock::duration refresh)
    : fixed_(std::move(fixedToken)), file_(std::move(tokenFile)), refresh_(refresh) {}

std::string TokenSource::token(Clock::time_point now) {
  if (file_.empty()) return fixed_;
  std::lock_guard<std::mutex> lk(mu_);
  if (stale_ || now - readAt_ >= refresh_) {
    std::string t;
    bool read = !readFile(file_, t);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    if (!read || t.empty()) {
      // Keep using the last good token: the file may be mid-rotation.
      LOG(WARNING) << "cannot read a token from " << file_ << "; keeping the previous one";
    } else {
      if (!cached_.empty() && t != cached_) LOG(INFO) << "token file " << file_ << " changed; using the new token";
      cached_ = std::move(t);
    }
    readAt_ = now;
    stale_ = false;
  }
  return cached_.empty() ? fixed_ : cached_;
}

void TokenSource::invalidate() {
  std::lock_guard<std::mutex> lk(mu_);
  stale_ = true;
}

}  // namespace kpn::kube
