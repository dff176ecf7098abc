#include "pkg/render/comment.h"

#include <cstdint>
#include <cstdio>

namespace kpn::render {

std::string boundedComment(std::string text) {
  if (text.size() <= kMaxCommentBytes) return text;
  // 64-bit FNV-1a over the whole text; 32 bits of it are shown.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char suffix[10];
  std::snprintf(suffix, sizeof suffix, "~%08x", static_cast<unsigned>(h >> 32));
  text.resize(kMaxCommentBytes - (sizeof suffix - 1));
  return text + suffix;
}

}  // namespace kpn::render
