#include "cmd/kube-proxy-nft/huge_page_malloc_exec.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "nft/kernel/huge_page_malloc.h"

namespace kpn::cmd {

void reexecWithHugePageMalloc(char** argv) {
  const std::vector<std::string> env = nft::currentEnvironment();
  std::vector<std::string> tuned = nft::withHugePageMalloc(env);
  if (tuned == env) return;
  std::vector<char*> envp;
  for (auto& e : tuned) envp.push_back(e.data());
  envp.push_back(nullptr);
  // /proc/self/exe: the binary this process runs, whatever argv[0] says (a relative name, a
  // symlink such as /usr/local/bin/kube-proxy). Returns only on failure: then run untuned.
  ::execve("/proc/self/exe", argv, envp.data());
}

}  // namespace kpn::cmd
