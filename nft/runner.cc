#include "nft/runner.h"

#include <nftables/libnftables.h>

#include <glog/logging.h>

namespace kpn::nft {

void NftRunner::CtxDeleter::operator()(nft_ctx* c) const { nft_ctx_free(c); }

NftRunner::Ctx NftRunner::newContext(bool json) {
  Ctx ctx(nft_ctx_new(NFT_CTX_DEFAULT));
  CHECK(ctx) << "nft_ctx_new failed";
  // In libnftables 1.0.6 the JSON output flag is also what makes it parse JSON input.
  if (json) nft_ctx_output_set_flags(ctx.get(), NFT_CTX_OUTPUT_JSON);
  nft_ctx_buffer_output(ctx.get());
  nft_ctx_buffer_error(ctx.get());
  return ctx;
}

NftRunner::NftRunner()
    : commitCtx_(newContext(true)), checkCtx_(newContext(true)), listCtx_(newContext(true)), nativeCtx_(newContext(false)) {
  nft_ctx_set_dry_run(checkCtx_.get(), true);
}
NftRunner::~NftRunner() = default;

RunResult NftRunner::run(nft_ctx* ctx, const std::string& buf) {
  int rc = worker_.call([ctx, &buf] { return nft_run_cmd_from_buffer(ctx, buf.c_str()); });
  RunResult r;
  r.ok = rc == 0;
  if (!r.ok) {
    const char* err = nft_ctx_get_error_buffer(ctx);
    r.error = err ? err : "unknown libnftables error";
    while (!r.error.empty() && (r.error.back() == '\n' || r.error.back() == ' ')) r.error.pop_back();
  }
  return r;
}

RunResult NftRunner::commit(const Transaction& txn) {
  if (txn.empty()) return {};
  std::string json = txn.toJson();
  RunResult r = run(commitCtx_.get(), json);
  r.bytes = json.size();
  // libnftables keeps what a commit built in its context (~13 MiB in millions of small blocks
  // after a cold sync at 10k services, scattered through the heap); a fresh context gives it back.
  if (txn.size() > kFreshContextOps) {
    worker_.call([this] {
      commitCtx_.reset();
      commitCtx_ = newContext(true);
      return 0;
    });
  }
  return r;
}

RunResult NftRunner::check(const Transaction& txn) {
  if (txn.empty()) return {};
  RunResult r = run(checkCtx_.get(), txn.toJson());
  if (txn.size() > kFreshContextOps) {
    worker_.call([this] {
      checkCtx_ = newContext(true);
      nft_ctx_set_dry_run(checkCtx_.get(), true);
      return 0;
    });
  }
  return r;
}

RunResult NftRunner::probeFamily(Family f) {
  return run(checkCtx_.get(), std::string("{\"nftables\":[{\"add\":{\"table\":{\"family\":\"") + familyName(f) +
                                  "\",\"name\":\"kube-proxy-probe\"}}}]}");
}

std::string staticDeclarationsText(const Ruleset& rs) {
  std::string text;
  for (const Table& t : rs.tables) {
    text += std::string("add table ") + familyName(t.family) + " " + t.name + "\n";
    for (const SetDecl& d : t.sets)
      if (!d.typeofSpec.empty()) text += nativeTypeofDeclaration(t.family, t.name, d) + "\n";
  }
  return text;
}

RunResult NftRunner::declareStatic(const Ruleset& rs) { return run(nativeCtx_.get(), staticDeclarationsText(rs)); }

RunResult NftRunner::list(Family f, const std::string& table, ListedTable* out) {
  *out = ListedTable{};
  std::string cmd = std::string("{\"nftables\":[{\"list\":{\"table\":{\"family\":\"") + familyName(f) +
                    "\",\"name\":\"" + table + "\"}}}]}";
  RunResult r = run(listCtx_.get(), cmd);
  if (!r.ok) {
    if (r.error.find("No such file or directory") != std::string::npos) return {};  // absent table
    return r;
  }
  const char* buf = nft_ctx_get_output_buffer(listCtx_.get());
  std::string error;
  auto parsed = parseListing(buf ? buf : "", &error);
  if (!parsed) return {false, error};
  *out = std::move(*parsed);
  return {};
}

RunResult NftRunner::runJson(const std::string& json, std::string* output) {
  RunResult r = run(listCtx_.get(), json);
  if (r.ok && output) {
    const char* buf = nft_ctx_get_output_buffer(listCtx_.get());
    *output = buf ? buf : "";
  }
  return r;
}

RunResult NftRunner::deleteTable(Family f, const std::string& table) {
  RunResult r = run(nativeCtx_.get(), std::string("delete table ") + familyName(f) + " " + table);
  if (!r.ok && r.error.find("No such file or directory") != std::string::npos) return {};  // absent: fine
  return r;
}

}  // namespace kpn::nft
