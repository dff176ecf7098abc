// libFuzzer: KubeProxyConfiguration text (YAML or JSON) through the strict decoder, validation and
// the conversion the daemon runs on it. What decodes must survive --write-config-to: encoding it
// and decoding that gives the same ProxyConfig (encode.h's promise). No crash, leak or throw.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pkg/config/decode.h"
#include "pkg/config/encode.h"
#include "pkg/config/node_config.h"
#include "pkg/config/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpn::config::ProxyConfig c;
  if (kpn::config::decodeProxyConfig(std::string_view(reinterpret_cast<const char*>(data), size), c)) return 0;
  kpn::config::validate(c);
  kpn::services::NodeConfig node;
  std::vector<std::string> warnings;
  kpn::config::toNodeConfig(c, node, &warnings);
  std::string text = kpn::config::encodeProxyConfig(c);
  kpn::config::ProxyConfig again;
  if (auto err = kpn::config::decodeProxyConfig(text, again)) {
    std::fprintf(stderr, "kube_proxy_config: the encoded config does not decode: %s\n%s\n", err->c_str(), text.c_str());
    std::abort();
  }
  if (!(again == c)) {
    std::fprintf(stderr, "kube_proxy_config: the round trip changed the config:\n%s\n", text.c_str());
    std::abort();
  }
  return 0;
}
