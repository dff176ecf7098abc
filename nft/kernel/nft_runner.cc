#include "nft/kernel/nft_runner.h"

#include <glog/logging.h>
#include <unistd.h>

#include "nft/json_text.h"
#include "nft/kernel/heap_populate.h"
#include "nft/static_declarations.h"

namespace kpn::nft {

namespace {

// The tables iptables-nft writes upstream's iptables-mode chains into (pkg/iptables/iptables_leftovers).
std::vector<std::pair<Family, std::string>> iptablesNftTables() {
  std::vector<std::pair<Family, std::string>> tables;
  for (Family f : {Family::IPv4, Family::IPv6})
    for (const char* t : {"nat", "filter", "mangle"}) tables.emplace_back(f, t);
  return tables;
}

}  // namespace

NftRunner::NftRunner(NftRunnerOptions options)
    : options_(options),
      helper_(nftHelperArgv(options.executable, getpid(), options.tables), options.callTimeout),
      iptablesHelper_(nftHelperArgv(options.executable, getpid(), iptablesNftTables()), options.callTimeout) {}
NftRunner::~NftRunner() = default;

namespace {

// A transaction's JSON goes to the helper in pieces of about this size as it is written, so the
// daemon never holds the whole text (nor a second copy of it as the request frame): at 50k
// services that was ~75 MB twice at the peak. The helper joins the pieces and libnftables still
// gets one buffer: one transaction.
constexpr size_t kJsonPieceBytes = size_t(1) << 20;

NftRunner::Request wholeRequest(NftOp op, const std::string& buf) {
  return [op, &buf](const SupervisedHelper::PieceWriter& write) { return write(encodeNftRequest(op, buf), false); };
}

NftRunner::Request transactionRequest(NftOp op, const Transaction& txn, size_t* bytes) {
  return [op, &txn, bytes](const SupervisedHelper::PieceWriter& write) {
    std::string out = encodeNftRequest(op, "");
    *bytes = 0;
    bool sent = true;
    txn.writeJson(out, kJsonPieceBytes, [&](std::string& piece) {
      *bytes += piece.size();
      sent = sent && write(piece, true);
    });
    *bytes += out.size() - 1;  // the op byte is not JSON
    return sent && write(out, false);
  };
}

}  // namespace

void NftRunner::expectTransaction(size_t ops) {
  // JSON per operation of a cold transaction: 7 774 KiB for 110 182 at 10k x 10 and 39 128 KiB
  // for 550 182 at 50k x 10 (72.3 and 72.8 bytes); the caller's count is the low one.
  constexpr size_t kJsonBytesPerOperation = 72;
  // Every cold commit the syncer announces is passed on (it announces above kBigCommitOps).
  // Alternated cold starts, 8 pairs at 10k x 10: sync 1452 -> 1279 ms (medians; render slows
  // beside the populate, the commit gains more); at 1k x 10 no difference (208 vs 212 ms).
  // An earlier 16 MiB limit came from bench readings biased by the order of its runs.
  const size_t bytes = ops * kJsonBytesPerOperation;
  RunResult r = run(NftOp::Prepare, std::to_string(bytes));
  if (!r.ok) VLOG(2) << "the helper did not take the transaction's announcement: " << r.error;
}

RunResult NftRunner::run(NftOp op, const std::string& buf, std::string* output) {
  return runOn(helper_, wholeRequest(op, buf), output);
}

RunResult NftRunner::runOn(SupervisedHelper& helper, const Request& request, std::string* output) {
  std::string error;
  auto frame = helper.callInPieces(request, &error);
  if (!frame) {
    LOG(ERROR) << "libnftables helper failed: " << error << "; a new helper takes the next call";
    return {false, "libnftables helper " + error};
  }
  auto answer = decodeNftAnswer(*frame);
  if (!answer) {
    helper.recycle();
    return {false, "libnftables helper sent a malformed answer"};
  }
  if (output) *output = std::move(answer->output);
  return {answer->ok, std::move(answer->error)};
}

RunResult NftRunner::change(SupervisedHelper& helper, NftOp op, const std::string& buf, std::string* output) {
  return change(helper, wholeRequest(op, buf), output);
}

RunResult NftRunner::change(SupervisedHelper& helper, const Request& request, std::string* output) {
  std::string error;
  std::optional<uint32_t> before = readGeneration(&error);
  RunResult r = runOn(helper, request, output);
  r.generation = readGeneration(&error);
  if (r.ok) noteChange(before, r.generation);
  return r;
}

// A helper of its own, scoped to the iptables-nft tables: the main helper's libnftables sees only
// our tables, so those would look absent through it. Its listing context holds their full cache,
// which only this rare call pays.
RunResult NftRunner::runJson(const std::string& json, std::string* output) {
  return change(iptablesHelper_, NftOp::List, json, output);
}

RunResult NftRunner::commitScratch(const std::string& table, const std::string& json) {
  if (!scratchHelper_ || scratchTable_ != table) {
    scratchTable_ = table;
    scratchHelper_ = std::make_unique<SupervisedHelper>(
        nftHelperArgv(options_.executable, getpid(), {{Family::IPv4, table}, {Family::IPv6, table}}), options_.callTimeout);
  }
  return change(*scratchHelper_, NftOp::Commit, json);
}

RunResult NftRunner::commit(const Transaction& txn) {
  if (txn.empty()) return {};
  size_t bytes = 0;
  bool big = txn.size() > kBigCommitOps;
  if (big) noteBigCommit(true);
  RunResult r = change(helper_, transactionRequest(NftOp::Commit, txn, &bytes));
  if (big) noteBigCommit(false);
  r.bytes = bytes;
  if (txn.size() > kRecycleAfterOps) helper_.renew();
  return r;
}

// The helper's dry-run context: the kernel validates the whole batch and aborts it.
RunResult NftRunner::check(const Transaction& txn) {
  if (txn.empty()) return {};
  size_t bytes = 0;
  RunResult r = runOn(helper_, transactionRequest(NftOp::Check, txn, &bytes), nullptr);
  if (txn.size() > kRecycleAfterOps) helper_.recycle();
  return r;
}

RunResult NftRunner::probeFamily(Family f) {
  return run(NftOp::Check, std::string("{\"nftables\":[{\"add\":{\"table\":{\"family\":\"") + familyName(f) +
                               "\",\"name\":" + jsonString(options_.probeTable) + "}}}]}");
}

RunResult NftRunner::declareStatic(const Ruleset& rs) { return change(helper_, NftOp::Native, staticDeclarationsText(rs)); }

RunResult NftRunner::list(Family f, const std::string& table, ListedTable* out) {
  *out = ListedTable{};
  std::string cmd = std::string("{\"nftables\":[{\"list\":{\"table\":{\"family\":\"") + familyName(f) +
                    "\",\"name\":\"" + table + "\"}}}]}";
  std::string output;
  RunResult r = run(NftOp::List, cmd, &output);
  if (!r.ok) {
    if (r.error.find("No such file or directory") != std::string::npos) return {};  // absent table
    return r;
  }
  std::string error;
  auto parsed = parseListing(output, &error);
  if (!parsed) return {false, error};
  *out = std::move(*parsed);
  // The listing context now caches the whole table (at 10k x 10, ~100k elements): commits in
  // that helper afterwards were 3-5x slower than in a fresh one. A new helper takes the next call.
  size_t elements = 0;
  for (const auto& [name, set] : out->sets) elements += set.elements.size();
  if (elements > kRecycleAfterOps) helper_.renew();
  return {};
}

RunResult NftRunner::deleteTable(Family f, const std::string& table) {
  RunResult r = change(helper_, NftOp::Native, std::string("delete table ") + familyName(f) + " " + table);
  if (!r.ok && r.error.find("No such file or directory") != std::string::npos) return {};  // absent: fine
  return r;
}

}  // namespace kpn::nft
