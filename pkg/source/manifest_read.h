// Reading and parsing the files of a manifest folder, apart from decoding and merging them. A
// file's read is file I/O and JSON/YAML parsing only (no objects, no logging, no metrics, no
// shared state), so a full read of the folder reads and parses its files on several threads
// (two thirds of the work), while the caller decodes, merges, logs and counts each file on its
// own thread in the order it asked for: what comes out, in which order, and where the long-lived
// objects are allocated is the same as reading the files one by one.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pkg/api/decode.h"

namespace kpn::source {

// Room for one file's text, kept from file to file by whoever reads several: a 3 MB file read
// into a fresh string costs zeroing it and faulting in its pages, which was as much as parsing it.
class ReadBuffer {
 public:
  ReadBuffer() = default;
  ReadBuffer(ReadBuffer&& o) noexcept : data_(std::move(o.data_)), capacity_(o.capacity_) { o.capacity_ = 0; }
  ReadBuffer& operator=(ReadBuffer&& o) noexcept {
    data_ = std::move(o.data_);
    capacity_ = o.capacity_;
    o.capacity_ = 0;
    return *this;
  }

  // At least `n` writable bytes; the contents are not kept.
  char* reserve(size_t n);
  // Grows to at least `n` bytes keeping the first `used`.
  char* grow(size_t n, size_t used);
  char* data() { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<char[]> data_;  // new char[]: not zeroed
  size_t capacity_ = 0;
};

// Whether a folder entry is a manifest: *.yaml, *.yml or *.json, not hidden.
bool isManifestFileName(const std::string& name);

// What reading one manifest file gave.
struct ManifestFile {
  enum class Outcome {
    kParsed,       // `parsed` holds the file's documents (decode them with decodeParsedManifest)
    kGone,         // no regular file by that name (deleted, moved out, a folder, a FIFO)
    kReadError,    // it is there but could not be read: `readErrno`
    kSyntaxError,  // it does not parse at all: `syntaxError`
  };
  std::string name;
  Outcome outcome = Outcome::kGone;
  int readErrno = 0;
  std::string syntaxError;
  ReadBuffer text;            // the file's text, which `parsed` points into
  api::ParsedManifest parsed;  // declared after `text`: goes first
};

// Reads and parses the file `name` in `dir` (following symlinks; *.json as JSON, the rest as
// YAML). `reuse`: an earlier result (cleared) whose buffers this one takes over.
ManifestFile readManifestFile(const std::string& dir, const std::string& name, ManifestFile reuse = {});

// Reads and parses `names` on `threads` threads of its own and hands each result to `consume` on
// the calling thread, in the order of `names`, as soon as it and those before it are done (the
// caller decodes one file while the threads read and parse the next); its buffers then serve a
// later file. At most two files per thread are read ahead of `consume`, which bounds the memory
// that parsed documents waiting for it hold. With no threads (or one name) everything happens
// on the calling thread, one file after the other.
void readManifestFiles(const std::string& dir, const std::vector<std::string>& names, unsigned threads,
                       const std::function<void(ManifestFile&)>& consume);

// How many threads of its own a full read of the folder uses: one per CPU besides the calling
// thread, at most 3 (none on 1 CPU). On 2 CPUs at 10k services (41 files) the one thread took
// the start-up read from ~315 to ~250 ms in 6 alternated cold starts (an earlier measurement,
// under other start-up work, had found no gain and kept it to 4 CPUs and up).
unsigned manifestReadThreads();

}  // namespace kpn::source
