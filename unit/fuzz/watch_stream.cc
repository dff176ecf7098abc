// libFuzzer: a watch response body cut into reads at input-chosen places, split into lines
// (LineSplitter, with a small line limit so the oversize path runs too), each line decoded as a
// watch event of a kind the first byte picks. No crash, leak or throw; every line handed out is
// within the limit and holds no newline.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "pkg/kube/line_splitter.h"
#include "pkg/kube/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char* kKinds[] = {"Service", "EndpointSlice", "Node", "ServiceCIDR"};
  const std::string kind = kKinds[data[0] % 4];
  const size_t limit = 64 + data[1] * 64;
  std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  kpn::kube::LineSplitter splitter(limit);
  size_t pos = 0, step = 1;
  while (pos < body.size()) {
    step = (step * 7 + static_cast<unsigned char>(body[pos])) % 97 + 1;  // uneven reads
    auto chunk = body.substr(pos, step);
    pos += chunk.size();
    splitter.feed(
        chunk,
        [&](std::string_view line) {
          if (line.size() > limit || line.find('\n') != std::string_view::npos) std::abort();
          kpn::kube::WatchEvent ev;
          kpn::kube::decodeWatchEvent(line, kind, ev);
          return true;
        },
        [](size_t) {});
  }
  return 0;
}
