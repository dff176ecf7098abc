// Tests that need a network namespace of their own (root only) run their body in a forked child
// that unshares one: the test process's namespace stays as it was. The body reports each failed
// expectation as a bit of its result (1..99); 100 and up mean its set-up failed.
#pragma once

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>

namespace kpn::testing {

inline constexpr int kChildSetupFailed = 100;

// The body's result, or nullopt when no child ran (no fork) or it did not exit normally.
inline std::optional<int> inOwnNetns(const std::function<int()>& body) {
  pid_t child = fork();
  if (child < 0) return std::nullopt;
  if (child == 0) _exit(unshare(CLONE_NEWNET) != 0 ? kChildSetupFailed : body());
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return std::nullopt;
  return WEXITSTATUS(status);
}

}  // namespace kpn::testing
