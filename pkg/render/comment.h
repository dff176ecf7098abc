// Comments on our rules and elements. The kernel keeps up to 128 bytes of a comment and `nft -f`
// refuses a longer one (the JSON path accepts it), so every comment goes through here.
#pragma once

#include <cstddef>
#include <string>

namespace kpn::render {

inline constexpr size_t kMaxCommentBytes = 128;

// `text` itself when it fits in kMaxCommentBytes; otherwise its start with "~" and 8 hex digits
// of a hash of the whole text, exactly kMaxCommentBytes long. Stable across runs and builds (a
// changed comment is a changed element), and two long texts sharing their first 119 bytes still
// differ.
std::string boundedComment(std::string text);

}  // namespace kpn::render
