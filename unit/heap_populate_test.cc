// The helper's heap made present ahead of a transaction (nft/kernel/heap_populate.h).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "nft/kernel/heap_populate.h"

using namespace kpn::nft;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // no brk heap to grow: every populate declines
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("background populate: one at a time, finished once, and the heap stays usable meanwhile") {
  BackgroundPopulate ahead;
  CHECK_FALSE(ahead.finish());  // nothing started
  constexpr size_t kBytes = size_t(8) << 20;
  const bool started = ahead.start(kBytes);
  CHECK(started == !kSanitized);
  if (started) CHECK_FALSE(ahead.start(kBytes));  // one runs (or ran, unfinished) already
  if (started) CHECK(ahead.planned() >= kBytes - (size_t(2) << 12));
  const auto besideFrom = std::chrono::steady_clock::now();
  // The caller goes on allocating from the heap's top while the pages are made present.
  for (int i = 0; i < 64; ++i) {
    char* p = static_cast<char*>(std::malloc(64 << 10));
    REQUIRE(p != nullptr);
    std::memset(p, i, 64 << 10);
    CHECK(p[(64 << 10) - 1] == static_cast<char>(i));
    std::free(p);
  }
  auto done = ahead.finish(besideFrom);
  CHECK(done.has_value() == started);
  if (done) {
    CHECK(done->bytes >= kBytes - (size_t(2) << 12));  // the block's whole pages
    CHECK(done->bytes <= kBytes);
    CHECK(done->waitedMs <= done->tookMs + 1);
    CHECK(done->besideMs <= done->tookMs + 1);  // it began after the populate
    CHECK(done->besideMs >= done->waitedMs);   // and the wait came after it began
  }
  CHECK(ahead.planned() == 0);
  CHECK_FALSE(ahead.finish());  // once
  CHECK(ahead.start(kBytes) == !kSanitized);  // and then again
  releasePopulatedHeap();
}

TEST_CASE("background populate: refused sizes start nothing") {
  BackgroundPopulate ahead;
  CHECK_FALSE(ahead.start(0));
  CHECK_FALSE(ahead.start(size_t(1) << 40));  // beyond any transaction we render
  CHECK_FALSE(ahead.finish());
}
