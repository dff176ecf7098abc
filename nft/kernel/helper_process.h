// A supervised child process that answers requests over a socketpair, one at a time.
// Whatever happens to the child (a segfault, an exit() inside a library, a hang) costs the caller
// one failed call: the child is reaped, the failure described, and the next call starts a new
// one. The parent never shares memory, signals or fate with it: the socket is written with
// MSG_NOSIGNAL, the child gets SIGKILL when the parent dies (PR_SET_PDEATHSIG, set by the child)
// and EOF when the parent closes its end.
//
// Framing: each request and each answer is a 4-byte native-endian length and that many bytes.
// A request may come in pieces (a big transaction is sent as it is written, never held whole):
// the length word of every piece but the last has its top bit set; the reader joins them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kpn::nft {

// Frame I/O on a blocking stream socket; false on EOF, error or a frame longer than maxBytes.
// A frame's length is at most kFrameLengthMask; readFrame joins pieces up to maxBytes in all.
constexpr uint32_t kMorePiecesBit = 0x80000000u, kFrameLengthMask = 0x7fffffffu;
bool writeFrame(int fd, const std::string& payload);
// One piece of a frame; more: further pieces of the same frame follow.
bool writeFramePiece(int fd, const std::string& piece, bool more);
bool readFrame(int fd, std::string* payload, size_t maxBytes);

class SupervisedHelper {
 public:
  // argv[0] is the executable; the child finds its end of the socketpair on fd 3. The child gets
  // the parent's environment as it is when the child starts.
  SupervisedHelper(std::vector<std::string> argv, std::chrono::milliseconds callTimeout);
  ~SupervisedHelper();  // closes the socket, gives the child 2 s to leave, then kills it
  SupervisedHelper(const SupervisedHelper&) = delete;
  SupervisedHelper& operator=(const SupervisedHelper&) = delete;

  // Sends one request and waits for its answer. On failure returns nullopt with *error saying
  // what happened to the child ("helper killed by signal 11 (Segmentation fault)"); the child is
  // gone by then and the next call starts a new one.
  std::optional<std::string> call(const std::string& request, std::string* error);
  // The same with the request written in pieces as it is produced: `produce` calls the writer
  // with each piece (more: another piece follows; the last one says false) and returns false as
  // soon as a write fails (the child is gone), true once the last piece went.
  using PieceWriter = std::function<bool(const std::string& piece, bool more)>;
  std::optional<std::string> callInPieces(const std::function<bool(const PieceWriter&)>& produce, std::string* error);
  // Ends the child now (its memory goes back to the system); the next call starts a new one.
  void recycle();
  // Ends the child and starts the next one at once, so that it has loaded its libraries and
  // made its contexts before the next call needs it (that start cost ~20 ms on the first
  // change after a big commit). A start that fails is retried by the next call.
  void renew();
  // Starts a child now if none runs (a start-up does it beside its other work, so that the
  // first call finds the libraries loaded and the contexts made). A failed start is retried by
  // the next call.
  void startIfNone();

  pid_t pid() const { return pid_; }  // 0 while none runs
  int starts() const { return starts_; }

 private:
  bool start(std::string* error);
  std::string stop(bool kill);  // closes, reaps; returns how the child ended

  // Two descriptors held in reserve (of /dev/null) and let go just before the socketpair of a new
  // child: a daemon whose descriptors an outside flood took can still start its helper.
  void holdReserve();
  int reserve_[2] = {-1, -1};
  std::vector<std::string> argv_;
  std::chrono::milliseconds timeout_;
  pid_t pid_ = 0;
  int fd_ = -1;
  int starts_ = 0;
};

}  // namespace kpn::nft
