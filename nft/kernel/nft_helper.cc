#include "nft/kernel/nft_helper.h"

#include <glog/logging.h>
#include <linux/netfilter.h>
#include <nftables/libnftables.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "nft/kernel/cache_scope.h"
#include "nft/kernel/heap_populate.h"
#include "nft/kernel/helper_process.h"
#include "nft/kernel/typeof_guard.h"

namespace kpn::nft {
namespace {

constexpr int kFd = 3;
constexpr size_t kMaxRequestBytes = size_t(1) << 30;

struct CtxDeleter {
  void operator()(nft_ctx* c) const { nft_ctx_free(c); }
};
using Ctx = std::unique_ptr<nft_ctx, CtxDeleter>;

Ctx newContext(bool json) {
  Ctx ctx(nft_ctx_new(NFT_CTX_DEFAULT));
  if (!ctx) return ctx;
  // In libnftables 1.0.6 the JSON output flag is also what makes it parse JSON input.
  if (json) nft_ctx_output_set_flags(ctx.get(), NFT_CTX_OUTPUT_JSON);
  nft_ctx_buffer_output(ctx.get());
  nft_ctx_buffer_error(ctx.get());
  return ctx;
}

// A failpoint for the e2e suite (e2e/test_42_isolation.py), inherited from the daemon's
// environment: KPN_FAULT_REFUSE_TEXT makes the helper refuse, as the kernel refuses a transaction,
// every commit and check whose JSON contains that text (one service's comment, or a family). It
// stands in for a kernel that keeps refusing one service or one family, which cannot be made on
// purpose in a test namespace. The helper says so on stderr when it starts with it set.
const char* kRefuseTextVar = "KPN_FAULT_REFUSE_TEXT";

// The helper's four contexts, created on first use: commits never list (a list on the
// committing context would make every later transaction fetch the full ruleset), and checks run
// on a context of their own that is always a dry run.
class Contexts {
 public:
  explicit Contexts(std::string refuseText) : refuseText_(std::move(refuseText)) {}
  // The commit context before the first request: a helper started ahead of its first call
  // (SupervisedHelper::renew) then answers it without this cost.
  void warm() { ready(NftOp::Commit); }

  // text.data() is NUL-terminated (requestText).
  NftAnswer run(NftOp op, std::string_view text) {
    NftAnswer a;
    if (!refuseText_.empty() && (op == NftOp::Commit || op == NftOp::Check) &&
        text.find(refuseText_) != std::string_view::npos) {
      a.error = std::string("Operation not permitted (failpoint ") + kRefuseTextVar + ")";
      return a;
    }
    Ctx& ctx = ready(op);
    if (!ctx) {
      a.error = "nft_ctx_new failed";
      return a;
    }
    a.ok = nft_run_cmd_from_buffer(ctx.get(), text.data()) == 0;
    if (!a.ok) {
      const char* err = nft_ctx_get_error_buffer(ctx.get());
      a.error = err ? err : "unknown libnftables error";
      while (!a.error.empty() && (a.error.back() == '\n' || a.error.back() == ' ')) a.error.pop_back();
    } else if (op == NftOp::List) {
      const char* out = nft_ctx_get_output_buffer(ctx.get());
      a.output = out ? out : "";
    }
    return a;
  }

 private:
  Ctx& ready(NftOp op) {
    Ctx& ctx = contextFor(op);
    if (!ctx) {
      ctx = newContext(op != NftOp::Native);
      if (ctx && op == NftOp::Check) nft_ctx_set_dry_run(ctx.get(), true);
    }
    return ctx;
  }
  Ctx& contextFor(NftOp op) {
    switch (op) {
      case NftOp::Commit: return commit_;
      case NftOp::List: return list_;
      case NftOp::Check: return check_;
      case NftOp::Native:
      case NftOp::Prepare: break;  // serve() answers a Prepare itself; never run on a context
    }
    return native_;
  }
  Ctx commit_, list_, native_, check_;
  std::string refuseText_;
};

constexpr const char* kParentArg = "parent:";

bool parseParentArg(const char* arg, pid_t* out) {
  size_t n = std::strlen(kParentArg);
  if (std::strncmp(arg, kParentArg, n) != 0) return false;
  char* end = nullptr;
  long v = std::strtol(arg + n, &end, 10);
  if (end == arg + n || *end != '\0' || v <= 0 || v > INT32_MAX) return false;
  *out = static_cast<pid_t>(v);
  return true;
}

bool parseScopeArg(const std::string& arg, ScopedTable* out) {
  auto colon = arg.find(':');
  if (colon == std::string::npos) return false;
  std::string fam = arg.substr(0, colon);
  if (fam == "ip") out->family = NFPROTO_IPV4;
  else if (fam == "ip6") out->family = NFPROTO_IPV6;
  else return false;
  out->name = arg.substr(colon + 1);
  return !out->name.empty();
}

// A Prepare request: the heap for the announced transaction, made present in the background
// while the daemon renders and the transaction is read in. Only a hint: the answer is always ok.
// Returns the announced JSON bytes when they are worth a populate (and the frame some room).
std::optional<size_t> prepare(std::string_view jsonBytesText, BackgroundPopulate& ahead) {
  const std::string digits(jsonBytesText);
  char* end = nullptr;
  errno = 0;
  const unsigned long long jsonBytes = std::strtoull(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || errno == ERANGE) return std::nullopt;
  if (jsonBytes <= kPopulateAboveJsonBytes || jsonBytes > kMaxRequestBytes) return std::nullopt;
  ahead.start(heapToPopulateFor(jsonBytes));
  return static_cast<size_t>(jsonBytes);
}

// The frame's room for the next request, once this one is answered (its text lives in the
// frame until then). Announced: room for the whole text now, since joined piece by piece it grew
// by doubling, a copy and a fresh mapping each time (~60 MiB more than the text at 50k
// services); the syncer's count is the low one (nft_runner.cc), and an eighth more covers the
// texts measured. Otherwise a big frame goes with the heap its transaction used.
void roomForNext(std::string& frame, std::optional<size_t> announcedJsonBytes) {
  if (announcedJsonBytes) frame.reserve(*announcedJsonBytes + *announcedJsonBytes / 8);
  else if (frame.capacity() > kPopulateAboveJsonBytes) std::string().swap(frame);
}

// After the request that came next: the background populate a Prepare started is over. The
// request did not wait for it: its allocations take pages from the same heap top as the populate
// makes them present, so on a slow host (first touches of 2-5 ms per 2 MiB) libnftables' parse
// runs on one CPU while the rest of its heap faults in on the other. The bytes it made present
// (given back after the answer).
size_t finishAhead(BackgroundPopulate& ahead, std::chrono::steady_clock::time_point requestFrom) {
  std::optional<BackgroundPopulate::Done> d = ahead.finish(requestFrom);
  if (!d || d->bytes == 0) return 0;
  LOG(INFO) << "nft helper: made " << (d->bytes >> 20) << " MiB of heap present ahead of the transaction in "
            << d->tookMs << " ms (waited " << d->waitedMs << " ms for it; the transaction ran beside its last "
            << d->besideMs << " ms)";
  return d->bytes;
}

// After the request: the populate it started for itself. One line per big transaction that was
// not announced in full (a full resync, a cold start of per-port chains).
bool finishRest(BackgroundPopulate& rest, std::chrono::steady_clock::time_point requestFrom, size_t jsonBytes) {
  std::optional<BackgroundPopulate::Done> d = rest.finish(requestFrom);
  if (!d || d->bytes == 0) return false;
  LOG(INFO) << "nft helper: made " << (d->bytes >> 20) << " MiB of heap present for a transaction of "
            << (jsonBytes >> 10) << " KiB in " << d->tookMs << " ms (beside its parse)";
  return true;
}

int serve(pid_t daemon, const std::vector<ScopedTable>& scope) {
  // Alone with its socket: no inherited listening sockets or connections of the daemon.
  ::close_range(kFd + 1, ~0U, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The daemon may have died before the line above: then this process was handed to a reaper and
  // the death signal will never come. The daemon's PID, as it read it itself, tells: helper and
  // daemon share a PID namespace, so this holds in any of them, the daemon being PID 1 of a
  // container's included (a test of "is my parent PID 1" made every helper there exit).
  if (getppid() != daemon) return 1;
  rlimit noCore{0, 0};
  setrlimit(RLIMIT_CORE, &noCore);
  setCacheScope(scope);
  if (!typeofGuardActive() || !cacheScopeActive())
    LOG(ERROR) << "nft helper: libnftnl interposers not active (guard " << typeofGuardActive() << ", scope "
               << cacheScopeActive() << ")";
  const char* refuse = std::getenv(kRefuseTextVar);
  if (refuse && *refuse)
    LOG(WARNING) << "nft helper: failpoint " << kRefuseTextVar << " is set: refusing every transaction that contains "
                 << refuse;
  Contexts contexts(refuse ? refuse : "");
  contexts.warm();
  std::string frame;
  BackgroundPopulate background;  // announced (a Prepare request)
  BackgroundPopulate rest;        // what a request needs beyond its announcement
  while (readFrame(kFd, &frame, kMaxRequestBytes)) {
    NftAnswer a;
    bool populated = false;
    std::optional<size_t> announced;
    const std::optional<NftOp> op = decodeNftRequestOp(frame);
    const std::string_view text = op ? requestText(frame) : std::string_view();
    if (!op) {
      a.error = "nft helper: malformed request";
    } else if (*op == NftOp::Prepare) {
      announced = prepare(text, background);
      a.ok = true;
    } else {
      // Unannounced, or announced well short of its size (the syncer counts low, and counts no
      // per-port chains): the whole heap it needs is made present beside the parse too, from a
      // new top past the request's own buffers; the pages made present already are skipped.
      // (Short by less, the last pages fault in as the parse reaches them.)
      const size_t needed = (*op == NftOp::Commit || *op == NftOp::Check) && text.size() > kPopulateAboveJsonBytes
                                ? heapToPopulateFor(text.size())
                                : 0;
      if (needed > background.planned() + needed / 4) rest.start(needed);
      const auto requestFrom = std::chrono::steady_clock::now();
      a = contexts.run(*op, text);
      // Before the answer and the heap's release: a trim beside a populate would keep pages.
      populated = finishAhead(background, requestFrom) > 0;
      populated = finishRest(rest, requestFrom, text.size()) || populated;
    }
    if (!writeFrame(kFd, encodeNftAnswer(a))) return 1;
    roomForNext(frame, announced);
    if (populated) releasePopulatedHeap();  // after the answer: the daemon goes on meanwhile
  }
  return 0;  // EOF: the daemon closed its end
}

void putU32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }

}  // namespace

std::string encodeNftRequest(NftOp op, const std::string& buffer) { return static_cast<char>(op) + buffer; }

std::optional<NftOp> decodeNftRequestOp(const std::string& frame) {
  if (frame.empty()) return std::nullopt;
  char c = frame[0];
  if (c != 'c' && c != 'l' && c != 'n' && c != 'k' && c != 'p') return std::nullopt;
  return static_cast<NftOp>(c);
}

// ok byte, error length, error, output
std::string encodeNftAnswer(const NftAnswer& a) {
  std::string s(1, a.ok ? '1' : '0');
  putU32(s, static_cast<uint32_t>(a.error.size()));
  s += a.error;
  s += a.output;
  return s;
}

std::optional<NftAnswer> decodeNftAnswer(const std::string& frame) {
  if (frame.size() < 5 || (frame[0] != '0' && frame[0] != '1')) return std::nullopt;
  uint32_t errLen;
  std::memcpy(&errLen, frame.data() + 1, sizeof errLen);
  if (frame.size() - 5 < errLen) return std::nullopt;
  NftAnswer a;
  a.ok = frame[0] == '1';
  a.error = frame.substr(5, errLen);
  a.output = frame.substr(5 + errLen);
  return a;
}

std::vector<std::string> nftHelperArgv(const std::string& exe, pid_t daemon,
                                       const std::vector<std::pair<Family, std::string>>& tables) {
  std::vector<std::string> argv{exe, kNftHelperSubcommand, std::string(kParentArg) + std::to_string(daemon)};
  for (const auto& [f, name] : tables) argv.push_back(std::string(familyName(f)) + ":" + name);
  return argv;
}

std::optional<int> runNftHelperIfAsked(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], kNftHelperSubcommand) != 0) return std::nullopt;
  pid_t daemon = 0;
  if (argc < 3 || !parseParentArg(argv[2], &daemon)) {
    LOG(ERROR) << "nft helper: the first argument must be " << kParentArg << "PID (the daemon's)";
    return 2;
  }
  std::vector<ScopedTable> scope;
  for (int i = 3; i < argc; ++i) {
    ScopedTable t;
    if (!parseScopeArg(argv[i], &t)) {
      LOG(ERROR) << "nft helper: bad table argument " << argv[i] << " (want ip:NAME or ip6:NAME)";
      return 2;
    }
    scope.push_back(t);
  }
  return serve(daemon, scope);
}

}  // namespace kpn::nft
