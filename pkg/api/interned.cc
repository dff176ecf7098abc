#include "pkg/api/interned.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace kpn::api {

struct InternedString::Entry {
  explicit Entry(std::string_view s) : text(s) {}
  std::atomic<size_t> refs{1};
  const std::string text;
};

namespace {

// The pool: value -> its live entry. Lookups and removals hold the mutex; handle copies only
// touch the entry's count. An entry whose count reached 0 is never revived: whoever dropped the
// last handle deletes it, and a lookup meanwhile makes a fresh entry for the value.
struct Pool {
  std::mutex mu;
  std::unordered_map<std::string_view, InternedString::Entry*> byText;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: handles in static objects may outlive any exit order
  return *p;
}

// Adds a reference unless the count already fell to 0 (the entry is on its way out).
bool tryRef(InternedString::Entry* e) {
  size_t n = e->refs.load(std::memory_order_relaxed);
  while (n != 0)
    if (e->refs.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) return true;
  return false;
}

}  // namespace

InternedString::InternedString(std::string_view s) {
  if (s.empty()) return;
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.byText.find(s);
  if (it != p.byText.end() && tryRef(it->second)) {
    entry_ = it->second;
    return;
  }
  entry_ = new Entry(s);
  if (it != p.byText.end()) p.byText.erase(it);  // the dying entry's key views its own text
  p.byText.emplace(std::string_view(entry_->text), entry_);
}

InternedString::InternedString(const InternedString& o) noexcept : entry_(o.entry_) {
  if (entry_) entry_->refs.fetch_add(1, std::memory_order_relaxed);
}

InternedString::~InternedString() {
  if (!entry_ || entry_->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    auto it = p.byText.find(std::string_view(entry_->text));
    if (it != p.byText.end() && it->second == entry_) p.byText.erase(it);
  }
  delete entry_;
}

const std::string& InternedString::str() const {
  static const std::string* empty = new std::string;
  return entry_ ? entry_->text : *empty;
}

size_t InternedString::poolSize() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.byText.size();
}

}  // namespace kpn::api
