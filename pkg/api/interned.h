// A name many decoded objects repeat (an endpoint's node and zone): one shared, immutable copy
// per distinct value, held by an 8-byte handle. 100k endpoints on a few hundred nodes keep a few
// hundred strings instead of 100k. Equal values are the same copy, so comparing two handles is a
// pointer compare. A value lives as long as some handle holds it (a pool of node names that only
// grew would be a leak a stream of slices naming made-up nodes could drive), and handles may be
// made, copied and dropped on any thread.
#pragma once

#include <string>
#include <string_view>

namespace kpn::api {

class InternedString {
 public:
  InternedString() = default;  // ""
  InternedString(std::string_view s);  // NOLINT: implicit, so `ep.nodeName = "node-a"` reads as for a string
  InternedString(const std::string& s) : InternedString(std::string_view(s)) {}
  InternedString(const char* s) : InternedString(std::string_view(s)) {}
  InternedString(const InternedString& o) noexcept;
  InternedString(InternedString&& o) noexcept : entry_(o.entry_) { o.entry_ = nullptr; }
  InternedString& operator=(InternedString o) noexcept {
    std::swap(entry_, o.entry_);
    return *this;
  }
  ~InternedString();

  const std::string& str() const;
  operator const std::string&() const { return str(); }  // NOLINT: reads as the string it stands for
  bool empty() const { return entry_ == nullptr; }

  friend bool operator==(const InternedString& a, const InternedString& b) { return a.entry_ == b.entry_; }
  friend bool operator!=(const InternedString& a, const InternedString& b) { return a.entry_ != b.entry_; }
  friend bool operator==(const InternedString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const std::string& a, const InternedString& b) { return a == b.str(); }
  friend bool operator!=(const InternedString& a, const std::string& b) { return a.str() != b; }
  friend bool operator!=(const std::string& a, const InternedString& b) { return a != b.str(); }
  friend bool operator==(const InternedString& a, const char* b) { return a.str() == b; }
  friend bool operator!=(const InternedString& a, const char* b) { return a.str() != b; }
  friend bool operator<(const InternedString& a, const InternedString& b) { return a.str() < b.str(); }

  // How many distinct values are held now (tests: a dropped value is gone from the pool).
  static size_t poolSize();

  struct Entry;

 private:
  Entry* entry_ = nullptr;  // null for ""
};

}  // namespace kpn::api
