#include "nft/kernel/heap_populate.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#include <thread>

#include <pthread.h>
#include <sched.h>

// Linux 5.14; older headers lack the name.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace kpn::nft {

namespace {
// glibc's defaults for M_MMAP_MAX (restored after the one allocation that must come from brk)
// and M_TRIM_THRESHOLD (restored after the transaction).
constexpr int kGlibcDefaultMmapMax = 65536;
constexpr int kGlibcDefaultTrimThreshold = 128 * 1024;
// mallopt takes an int; a transaction this big is far beyond anything we render (50k x 10 is
// ~1.5 GiB of heap), so the cap only keeps the arithmetic in range.
constexpr size_t kMaxPopulateBytes = size_t(1) << 30 | size_t(1) << 29;
}  // namespace

size_t heapToPopulateFor(size_t jsonBytes) {
  // Measured peaks: 38.7x the text at 30k x 10 and 39.2x at 10k x 10 (libnftables' objects and
  // jansson's tree, the text itself included). 36x stays under both.
  constexpr size_t kHeapPerJsonByte = 36;
  if (jsonBytes > kMaxPopulateBytes / kHeapPerJsonByte) return kMaxPopulateBytes;
  return jsonBytes * kHeapPerJsonByte;
}

namespace {

struct PageRange {
  uintptr_t start = 0, end = 0;
};

// Grows the heap's free top to hold `bytes`; the whole pages of that free block.
std::optional<PageRange> growHeapTop(size_t bytes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)bytes;
  return std::nullopt;  // a sanitizer's allocator has no brk heap to grow
#else
  if (bytes == 0 || bytes > kMaxPopulateBytes) return std::nullopt;
  // Freed, the block joins the heap's top, and stays there: a trim would hand it straight back.
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // From brk, where libnftables' small allocations will find it, not from an mmap of its own.
  mallopt(M_MMAP_MAX, 0);
  void* block = std::malloc(bytes);
  mallopt(M_MMAP_MAX, kGlibcDefaultMmapMax);
  if (!block) return std::nullopt;
  // The block's whole pages (its first bytes become the free chunk's header, which the populate
  // leaves as they are anyway: it writes nothing).
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = (reinterpret_cast<uintptr_t>(block) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(block) + bytes) & ~(page - 1);
  std::free(block);
  if (end <= start) return std::nullopt;
  return PageRange{start, end};
#endif
}

// In pieces: a populate holds the address space's lock (for reading) through each call, and the
// parse beside it may need that lock to grow the heap or map a big buffer.
constexpr uintptr_t kPopulatePieceBytes = uintptr_t(16) << 20;

bool makePresent(const PageRange& r) {
  for (uintptr_t at = r.start; at < r.end; at += kPopulatePieceBytes) {
    const uintptr_t len = std::min(kPopulatePieceBytes, r.end - at);
    if (madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_WRITE) != 0) return false;
  }
  return true;
}

long long msBetween(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

struct BackgroundPopulate::Run {
  PageRange pages;
  std::chrono::steady_clock::time_point started, ended;
  bool ok = false;
  std::thread thread;
};

BackgroundPopulate::BackgroundPopulate() = default;
BackgroundPopulate::~BackgroundPopulate() { finish(); }

bool BackgroundPopulate::start(size_t bytes) {
  if (run_) return false;
  std::optional<PageRange> pages = growHeapTop(bytes);
  if (!pages) return false;
  auto run = std::make_unique<Run>();
  run->pages = *pages;
  run->started = std::chrono::steady_clock::now();
  Run* r = run.get();
  try {
    r->thread = std::thread([r] {
      // At idle priority: while the daemon renders on both CPUs (a cold start's render of 256
      // services and more runs on two threads) the populate waits, and it runs on the CPU the
      // diff, the transaction's writing and the commit leave free. Beside the render it cost
      // the render as much as it saved (50k services: render 483 ms alone, ~920 ms beside it).
      sched_param idle{};
      pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
      r->ok = makePresent(r->pages);
      r->ended = std::chrono::steady_clock::now();
    });
  } catch (const std::system_error&) {
    return false;  // no thread: the transaction's own populate (or its page faults) does the work
  }
  run_ = std::move(run);
  return true;
}

size_t BackgroundPopulate::planned() const { return run_ ? run_->pages.end - run_->pages.start : 0; }

std::optional<BackgroundPopulate::Done> BackgroundPopulate::finish(
    std::optional<std::chrono::steady_clock::time_point> besideFrom) {
  if (!run_) return std::nullopt;
  const auto waitFrom = std::chrono::steady_clock::now();
  run_->thread.join();
  Done d;
  d.bytes = run_->ok ? run_->pages.end - run_->pages.start : 0;
  d.tookMs = msBetween(run_->started, run_->ended);
  d.waitedMs = run_->ended > waitFrom ? msBetween(waitFrom, run_->ended) : 0;
  if (besideFrom && run_->ended > *besideFrom) d.besideMs = msBetween(*besideFrom, run_->ended);
  run_.reset();
  return d;
}

void releasePopulatedHeap() {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  mallopt(M_TRIM_THRESHOLD, kGlibcDefaultTrimThreshold);
  malloc_trim(0);
#endif
}

}  // namespace kpn::nft
