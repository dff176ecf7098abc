#include "cmd/kube-proxy-nft/malloc_tunables_exec.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "nft/kernel/malloc_tunables.h"

namespace kpn::cmd {

namespace {

// The kernel names a process (its comm: ps, top, pgrep) after the file it executes: "exe" after
// the exec of /proc/self/exe below. Gives it back the name of the file it was started as, the
// last part of argv[0] ("kube-proxy" for /usr/local/bin/kube-proxy).
void restoreProcessName(const char* argv0) {
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  std::string name = argv0;
  name = name.substr(name.rfind('/') + 1);
  if (comm != "exe" || name.empty() || name == "exe") return;
  ::prctl(PR_SET_NAME, name.substr(0, 15).c_str());
}

}  // namespace

void reexecWithMallocTunables(char** argv) {
  const std::vector<std::string> env = nft::currentEnvironment();
  std::vector<std::string> tuned = nft::environmentWithMallocTunables(env);
  if (tuned == env) {
    if (argv[0]) restoreProcessName(argv[0]);
    return;
  }
  std::vector<char*> envp;
  for (auto& e : tuned) envp.push_back(e.data());
  envp.push_back(nullptr);
  // /proc/self/exe: the binary this process runs, whatever argv[0] says (a relative name, a
  // symlink such as /usr/local/bin/kube-proxy). Returns only on failure: then run untuned, but
  // with the tunables in the environment the helpers inherit (their own start finds it there).
  ::execve("/proc/self/exe", argv, envp.data());
  nft::setMallocTunablesForChildren();
}

}  // namespace kpn::cmd
