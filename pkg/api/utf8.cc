#include "pkg/api/utf8.h"

namespace kpn::api {

std::optional<CodePoint> decodeUtf8At(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return CodePoint{c, 1};
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c == 0xE0) len = 3, lo = 0xA0;   // no overlong 3-byte forms
  else if (c == 0xED) len = 3, hi = 0x9F;   // no UTF-16 surrogates
  else if (c >= 0xE1 && c <= 0xEF) len = 3;
  else if (c == 0xF0) len = 4, lo = 0x90;   // no overlong 4-byte forms
  else if (c == 0xF4) len = 4, hi = 0x8F;   // nothing above U+10FFFF
  else if (c >= 0xF1 && c <= 0xF3) len = 4;
  else return std::nullopt;
  if (i + len > s.size()) return std::nullopt;
  const auto second = static_cast<unsigned char>(s[i + 1]);
  if (second < lo || second > hi) return std::nullopt;
  uint32_t value = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < 0x80 || b > 0xBF) return std::nullopt;
    value = value << 6 | (b & 0x3F);
  }
  return CodePoint{value, len};
}

std::optional<size_t> firstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {  // ASCII, most of any manifest: no decoding
      ++i;
      continue;
    }
    const auto cp = decodeUtf8At(s, i);
    if (!cp) return i;
    i += cp->length;
  }
  return std::nullopt;
}

}  // namespace kpn::api
