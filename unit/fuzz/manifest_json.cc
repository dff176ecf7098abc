// libFuzzer: a manifest file's text as JSON, through the decoder the folder
// source uses. It must never crash, leak or throw, whatever it is given.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pkg/api/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kpn::api::DecodedObjects out;
  std::string error;
  kpn::api::decodeManifest(std::string_view(reinterpret_cast<const char*>(data), size), true, out, &error);
  return 0;
}
