// Whether text is UTF-8, as Kubernetes' own decoders require of manifests and configuration (Go's
// YAML and JSON readers refuse invalid bytes): the YAML parser would pass them through in one
// place and mangle them in another, so that what we read is not what we write back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kpn::api {

// The offset of the first byte that is not part of a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are not), or nullopt when all of it is.
std::optional<size_t> firstInvalidUtf8(std::string_view text);

struct CodePoint {
  uint32_t value;
  size_t length;  // in bytes, 1 to 4
};

// The code point whose well-formed UTF-8 sequence starts at text[at], or nullopt when none does
// (the same rules as firstInvalidUtf8).
std::optional<CodePoint> decodeUtf8At(std::string_view text, size_t at);

}  // namespace kpn::api
