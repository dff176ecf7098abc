// What the diagnosis socket answers (local_socket.h carries the bytes): a status or state question
// goes to the sync loop's thread (MainThreadCalls) and comes back as one JSON line; a question it
// cannot read, or one the loop does not get to in time, gets {"error": "..."}.
#pragma once

#include <chrono>
#include <string>

#include "pkg/diag/daemon_view.h"
#include "pkg/diag/main_thread_calls.h"

namespace kpn::diag {

class SocketAnswers {
 public:
  SocketAnswers(const DaemonView& view, MainThreadCalls& calls,
                std::chrono::milliseconds limit = std::chrono::seconds(10))
      : view_(view), calls_(calls), limit_(limit) {}
  // On the socket's thread.
  std::string answer(const std::string& requestLine) const;

 private:
  const DaemonView& view_;
  MainThreadCalls& calls_;
  std::chrono::milliseconds limit_;
};

}  // namespace kpn::diag
