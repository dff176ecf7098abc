// libFuzzer: kubeconfig text (YAML). Relative paths resolve against a folder that does not exist,
// so a fuzzed file name never reads anything. No crash, leak or throw.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pkg/kube/client_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpn::kube::ClientConfig cfg;
  std::string text(reinterpret_cast<const char*>(data), size);
  kpn::kube::parseKubeconfig(text, "/nonexistent-kpn-fuzz", "", cfg);
  return 0;
}
