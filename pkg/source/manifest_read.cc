#include "pkg/source/manifest_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "pkg/source/unique_fd.h"

namespace kpn::source {
namespace {

bool endsWith(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Reads the regular file at `path` (following symlinks) into `buffer`; its size in *size.
ManifestFile::Outcome readRegularFile(const std::string& path, ReadBuffer& buffer, size_t* size, int* err) {
  using Outcome = ManifestFile::Outcome;
  // O_NONBLOCK: a FIFO named like a manifest must not hang the daemon in open().
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    *err = errno;
    return errno == ENOENT || errno == ENOTDIR ? Outcome::kGone : Outcome::kReadError;
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return *err = errno, Outcome::kReadError;
  if (!S_ISREG(st.st_mode)) return Outcome::kGone;
  // +1: reaching EOF needs no growing, and the in-place parse has room for its NUL.
  char* data = buffer.reserve(static_cast<size_t>(st.st_size) + 1);
  size_t used = 0;
  while (true) {
    if (used == buffer.capacity()) data = buffer.grow(2 * buffer.capacity(), used);  // it grew meanwhile
    ssize_t n = read(fd.get(), data + used, buffer.capacity() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return *err = errno, Outcome::kReadError;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  *size = used;  // < capacity: the loop grows before each read
  return Outcome::kParsed;
}

}  // namespace

bool isManifestFileName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  return endsWith(name, ".yaml") || endsWith(name, ".yml") || endsWith(name, ".json");
}

char* ReadBuffer::reserve(size_t n) {
  if (n > capacity_) {
    data_.reset();  // before allocating: the old contents are not wanted, so never hold both
    data_.reset(new char[n]);
    capacity_ = n;
  }
  return data_.get();
}

char* ReadBuffer::grow(size_t n, size_t used) {
  if (n <= capacity_) return data_.get();
  std::unique_ptr<char[]> bigger(new char[n]);
  std::memcpy(bigger.get(), data_.get(), std::min(used, capacity_));
  data_ = std::move(bigger);
  capacity_ = n;
  return data_.get();
}

ManifestFile readManifestFile(const std::string& dir, const std::string& name, ManifestFile reuse) {
  ManifestFile f;
  f.name = name;
  f.text = std::move(reuse.text);
  f.parsed = std::move(reuse.parsed);
  size_t size = 0;
  f.outcome = readRegularFile(dir + "/" + name, f.text, &size, &f.readErrno);
  if (f.outcome != ManifestFile::Outcome::kParsed) return f;
  // The buffer's byte after the text is ours (readRegularFile keeps one spare).
  if (!api::parseManifestInPlace(f.text.data(), size, endsWith(name, ".json"), f.parsed, &f.syntaxError))
    f.outcome = ManifestFile::Outcome::kSyntaxError;
  return f;
}

void readManifestFiles(const std::string& dir, const std::vector<std::string>& names, unsigned threads,
                       const std::function<void(ManifestFile&)>& consume) {
  const size_t workers = std::min<size_t>(threads, names.size());
  if (workers == 0 || names.size() == 1) {
    ManifestFile f;
    for (const auto& name : names) {
      f = readManifestFile(dir, name, std::move(f));
      consume(f);
      f.parsed.clear();  // before its text is reused
    }
    return;
  }
  // Workers take the next name (while fewer than `window` files wait for the caller) and park
  // the result in its slot; the calling thread consumes the slots in order and hands their
  // buffers back. A worker waits only for the caller, which waits only for workers that hold an
  // earlier file, so the loop below always ends, and so do the workers.
  const size_t window = 2 * workers;
  std::mutex mu;
  std::condition_variable ready, room;
  std::vector<std::optional<ManifestFile>> done(names.size());
  std::vector<ManifestFile> spare;  // consumed files, whose buffers the next reads reuse
  size_t next = 0, consumed = 0;
  auto work = [&] {
    while (true) {
      size_t i;
      ManifestFile reuse;
      {
        std::unique_lock<std::mutex> lock(mu);
        room.wait(lock, [&] { return next >= names.size() || next < consumed + window; });
        if (next >= names.size()) return;
        i = next++;
        if (!spare.empty()) {
          reuse = std::move(spare.back());
          spare.pop_back();
        }
      }
      ManifestFile f = readManifestFile(dir, names[i], std::move(reuse));
      std::lock_guard<std::mutex> lock(mu);
      done[i] = std::move(f);
      ready.notify_one();
    }
  };
  std::vector<std::thread> pool;
  struct Joiner {  // also when `consume` throws: the workers finish without the caller
    std::mutex& mu;
    size_t& consumed;
    std::condition_variable& room;
    std::vector<std::thread>& pool;
    ~Joiner() {
      {
        std::lock_guard<std::mutex> lock(mu);
        consumed = static_cast<size_t>(-1) / 2;  // no more waiting for room
      }
      room.notify_all();
      for (auto& t : pool) t.join();
    }
  } joiner{mu, consumed, room, pool};
  try {
    for (size_t i = 0; i < workers; ++i) pool.emplace_back(work);
  } catch (const std::system_error&) {  // no threads to be had: as many as there are will do
    if (pool.empty()) return readManifestFiles(dir, names, 0, consume);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    std::optional<ManifestFile> f;
    {
      std::unique_lock<std::mutex> lock(mu);
      ready.wait(lock, [&] { return done[i].has_value(); });
      f = std::move(done[i]);
      done[i].reset();
    }
    consume(*f);
    f->parsed.clear();  // before its text is reused
    std::lock_guard<std::mutex> lock(mu);
    spare.push_back(std::move(*f));
    ++consumed;
    room.notify_one();
  }
}

unsigned manifestReadThreads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return cpus < 2 ? 0 : std::min(cpus - 1, 3u);  // hardware_concurrency() may say 0
}

}  // namespace kpn::source
