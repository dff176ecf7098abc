#include "pkg/api/utf8.h"

namespace kpn::api {

std::optional<size_t> firstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;   // no overlong 3-byte forms
    else if (c == 0xED) len = 3, hi = 0x9F;   // no UTF-16 surrogates
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;   // no overlong 4-byte forms
    else if (c == 0xF4) len = 4, hi = 0x8F;   // nothing above U+10FFFF
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else return i;
    if (i + len > s.size()) return i;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < 0x80 || b > 0xBF) return i;
    }
    i += len;
  }
  return std::nullopt;
}

}  // namespace kpn::api
