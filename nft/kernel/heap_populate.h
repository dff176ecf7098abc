// The helper's heap made present before libnftables parses a big transaction.
//
// libnftables 1.0.6 builds jansson's tree of the whole JSON text and then its own objects from it:
// the helper's heap peaks at ~37x the text (926 MiB for the 24 MB of a cold sync at 30k services).
// Left to fault in page by page as the parser grows the heap, those pages cost the cold commit
// 0.4-1.7 s of system time at 30k (its "slow mode": 2.1-3.4 s for the same JSON); made present in
// one madvise(MADV_POPULATE_WRITE) first, they cost 40-120 ms and the commit took 1.65-1.73 s every
// time (bench notes in docs/benchmarks.md, "The helper's heap populated").
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

namespace kpn::nft {

// How many bytes of heap to make present for a transaction text of `jsonBytes`: a little under
// the measured peak, so that populating never raises it.
size_t heapToPopulateFor(size_t jsonBytes);

// The heap's free top grown by `bytes` (from brk, kept when freed) and its pages made present in
// the background, for a transaction announced before it arrives (or one that just arrived,
// bigger than announced). The top is grown on the calling thread (the main arena's, where
// libnftables' allocations land; a malloc on another thread would take another arena), and a
// thread of its own makes the pages present while the caller goes on reading the transaction in,
// and parsing it. Making a page present writes nothing, so memory the caller's mallocs take from
// that top meanwhile is safe, and a page both fault in at once is faulted in once.
class BackgroundPopulate {
 public:
  BackgroundPopulate();
  ~BackgroundPopulate();  // waits for the thread
  BackgroundPopulate(const BackgroundPopulate&) = delete;
  BackgroundPopulate& operator=(const BackgroundPopulate&) = delete;

  // False when one runs already, under a sanitizer (whose allocator has no brk heap), or when
  // the heap could not grow; the parse then faults its pages in as they come.
  bool start(size_t bytes);
  // The bytes the running (or ran, unfinished) populate covers; 0 when none was started.
  size_t planned() const;
  struct Done {
    size_t bytes = 0;         // made present (0: the kernel refused)
    long long tookMs = 0;     // from start() to the last page
    long long waitedMs = 0;   // of that, how long finish() waited
    long long besideMs = 0;   // of that, how long it ran after `besideFrom` (0 without one)
  };
  // Waits for the thread; nullopt when none was started since the last finish(). besideFrom:
  // when the work it ran beside began (the transaction's parse), for Done::besideMs.
  std::optional<Done> finish(std::optional<std::chrono::steady_clock::time_point> besideFrom = std::nullopt);

 private:
  struct Run;
  std::unique_ptr<Run> run_;
};

// After the transaction: glibc trims its heap again, and gives back what the transaction left
// free (a helper kept for the next call would otherwise hold its peak for good).
void releasePopulatedHeap();

// Below this much JSON (~30k operations) populating is not worth its call: at 10k services x 10
// (8 MB) it saved ~30 ms of 600.
constexpr size_t kPopulateAboveJsonBytes = size_t(2) << 20;

}  // namespace kpn::nft
