// The libnftables helper process: the daemon's own binary started with a hidden subcommand,
// holding every libnftables context, so that a crash or exit() inside libnftables (a set written
// by a newer nft, EMFILE when it opens its netlink socket) ends the helper, never the daemon.
// In the helper, libnftables sees only our own tables (cache_scope.h) and sets with typeof data
// it cannot parse are neutralised (typeof_guard.h). Core dumps are off there (a crash loop on a
// node must not fill its disk with cores).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nft/expr.h"

namespace kpn::nft {

constexpr const char* kNftHelperSubcommand = "__nft-helper";

enum class NftOp : char {
  Commit = 'c',  // JSON transaction (JSON context that never lists)
  List = 'l',    // JSON list command (its own context); the answer carries the output
  Native = 'n',  // native syntax (start-up declarations, table deletion)
  Check = 'k',   // JSON transaction on a dry-run context: the kernel validates it, nothing applies
  // A hint: a transaction of about this many bytes of JSON (decimal) comes next. The helper makes
  // heap present for it in the background (heap_populate.h) and answers at once; the next request
  // of any kind waits for that. Nothing reaches the kernel.
  Prepare = 'p',
};

struct NftAnswer {
  bool ok = false;
  std::string output;  // list output
  std::string error;   // libnftables' error text
};

std::string encodeNftRequest(NftOp op, const std::string& buffer);
// A request's op, or nullopt for a malformed frame. Its text is read in place (requestText): at 50k
// services a copy was 40 MB of fresh memory between the last piece and the parse.
std::optional<NftOp> decodeNftRequestOp(const std::string& frame);
// The text after the op byte; data() is NUL-terminated (the frame's own terminator), as
// libnftables wants it.
inline std::string_view requestText(const std::string& frame) { return std::string_view(frame).substr(1); }
std::string encodeNftAnswer(const NftAnswer& a);
std::optional<NftAnswer> decodeNftAnswer(const std::string& frame);

// The command line that starts the helper from `exe`, as the child of process `daemon` (its PID
// as the daemon reads it: getpid()), with `tables` as its cache scope.
std::vector<std::string> nftHelperArgv(const std::string& exe, pid_t daemon,
                                       const std::vector<std::pair<Family, std::string>>& tables);

// For main(): when argv names the helper subcommand, serves requests on fd 3 until EOF and returns
// the exit status; nullopt otherwise (a normal start).
std::optional<int> runNftHelperIfAsked(int argc, char** argv);

}  // namespace kpn::nft
