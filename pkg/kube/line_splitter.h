// Splits a watch response body into lines. The API server writes one JSON event per line, but the
// HTTP chunks (and TCP reads) that carry them split wherever they like: an event may span many
// chunks and a chunk may hold many events. A line longer than the limit is discarded whole (and
// reported) instead of growing the buffer without bound.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kpn::kube {

class LineSplitter {
 public:
  explicit LineSplitter(size_t maxLine) : maxLine_(maxLine) {}

  // Feeds bytes; calls onLine(std::string_view) for each complete non-empty line (without the
  // "\n" or a "\r" before it) and onOversize(size_t bytesDropped) for each line that exceeded the
  // limit. Stops early, returning false, when onLine returns false.
  template <class OnLine, class OnOversize>
  bool feed(std::string_view data, OnLine&& onLine, OnOversize&& onOversize) {
    while (!data.empty()) {
      size_t nl = data.find('\n');
      std::string_view part = data.substr(0, nl);
      if (!overflowing_ && buf_.size() + part.size() > maxLine_) {
        overflowing_ = true;
        dropped_ = buf_.size();
        buf_.clear();
        buf_.shrink_to_fit();
      }
      if (overflowing_) dropped_ += part.size();
      if (nl == std::string_view::npos) {
        if (!overflowing_) buf_.append(part);
        return true;
      }
      data.remove_prefix(nl + 1);
      if (overflowing_) {
        overflowing_ = false;
        onOversize(dropped_);
        dropped_ = 0;
        continue;
      }
      std::string_view line;
      if (buf_.empty()) {
        line = part;  // the common case: a whole line inside one read, no copy
      } else {
        buf_.append(part);
        line = buf_;
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      bool more = line.empty() || onLine(line);
      buf_.clear();
      if (!more) return false;
    }
    return true;
  }

  // Bytes of an unfinished line held (what a stream that ends now leaves behind).
  size_t pending() const { return overflowing_ ? dropped_ : buf_.size(); }

 private:
  const size_t maxLine_;
  std::string buf_;
  bool overflowing_ = false;
  size_t dropped_ = 0;
};

}  // namespace kpn::kube
