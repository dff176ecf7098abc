// Defences of the libnftables side against a hostile node: the typeof guard, the cache scope and
// the supervised helper process.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "nft/kernel/cache_scope.h"
#include "nft/kernel/malloc_tunables.h"
#include "nft/kernel/helper_process.h"
#include "nft/kernel/nft_helper.h"
#include "nft/kernel/nft_runner.h"
#include "nft/kernel/typeof_guard.h"

using namespace kpn::nft;

namespace {

using Bytes = std::vector<unsigned char>;

void tlv(Bytes& b, unsigned char type, const Bytes& value) {
  b.push_back(type);
  b.push_back(static_cast<unsigned char>(value.size()));
  b.insert(b.end(), value.begin(), value.end());
}
Bytes u32(uint32_t v) {
  Bytes b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}
// KEY_TYPEOF (3) or DATA_TYPEOF (4) { TYPEOF_EXPR (0) = etype, TYPEOF_DATA (1) = data }
void typeofAttr(Bytes& b, unsigned char which, uint32_t etype, const Bytes& data) {
  Bytes nest;
  tlv(nest, 0, u32(etype));
  tlv(nest, 1, data);
  tlv(b, which, nest);
}
Bytes concatOf(const std::vector<uint32_t>& members) {
  Bytes data;
  for (size_t i = 0; i < members.size(); ++i) {
    Bytes member;
    tlv(member, 0, u32(members[i]));
    tlv(member, 1, Bytes{0, 4, 1, 0, 0, 0});  // a payload's own udata, opaque here
    tlv(data, static_cast<unsigned char>(i), member);
  }
  return data;
}

}  // namespace

TEST_CASE("typeof guard: the userdata nft >= 1.1.2 writes for a plain set is neutralised, the rest kept") {
  // KEYBYTEORDER, then 03 08 | 00 04 04000000 | 01 00 (EXPR_VALUE, empty data), then a comment.
  Bytes ud;
  tlv(ud, 0, u32(2));
  typeofAttr(ud, 3, 4, {});
  tlv(ud, 7, Bytes{'h', 'i', 0});
  Bytes before = ud;
  REQUIRE(ud[6] == 3);
  CHECK(neutraliseUnparsableTypeof(ud.data(), static_cast<uint32_t>(ud.size())) == 1);
  CHECK(ud[6] == 0xff);  // renamed to an attribute 1.0.6 skips
  ud[6] = 3;
  CHECK(ud == before);  // nothing else touched
}

TEST_CASE("typeof guard: what our own maps carry (numgen key, concat of payloads) is kept") {
  Bytes ud;
  typeofAttr(ud, 3, 23, Bytes{0, 4, 1, 0, 0, 0});  // numgen
  typeofAttr(ud, 4, 13, concatOf({7, 7}));         // ip daddr . tcp dport
  typeofAttr(ud, 4, 9, Bytes{0, 4, 3, 0, 0, 0});   // meta mark
  Bytes before = ud;
  CHECK(neutraliseUnparsableTypeof(ud.data(), static_cast<uint32_t>(ud.size())) == 0);
  CHECK(ud == before);
}

TEST_CASE("typeof guard: unknown expression types, also inside a concat, and broken nests are neutralised") {
  Bytes ud;
  typeofAttr(ud, 3, 28, Bytes{0, 4, 1, 0, 0, 0});  // a type 1.0.6 does not know (it would abort)
  typeofAttr(ud, 4, 13, concatOf({7, 4}));         // a concat member of EXPR_VALUE
  Bytes broken;
  tlv(broken, 0, Bytes{4, 0});  // TYPEOF_EXPR of 2 bytes
  tlv(broken, 1, {});
  tlv(ud, 3, broken);
  CHECK(neutraliseUnparsableTypeof(ud.data(), static_cast<uint32_t>(ud.size())) == 3);
}

TEST_CASE("typeof guard: a truncated buffer is walked only as far as it is well formed") {
  Bytes ud;
  typeofAttr(ud, 3, 4, {});
  ud.push_back(3);
  ud.push_back(200);  // claims 200 bytes that are not there
  CHECK(neutraliseUnparsableTypeof(ud.data(), static_cast<uint32_t>(ud.size())) == 1);
  CHECK(neutraliseUnparsableTypeof(ud.data(), 1) == 0);
  CHECK(neutraliseUnparsableTypeof(nullptr, 0) == 0);
}

TEST_CASE("typeof guard and cache scope: the dynamic linker resolves libnftnl's functions to ours") {
  CHECK(typeofGuardActive());
  CHECK(cacheScopeActive());
}

namespace {

// An nf_tables message: header, nfgenmsg, then attributes.
std::vector<char> nftMessage(uint8_t family, const std::vector<std::pair<uint16_t, std::string>>& attrs) {
  std::vector<char> m(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)), 0);
  reinterpret_cast<nfgenmsg*>(m.data() + NLMSG_HDRLEN)->nfgen_family = family;
  for (const auto& [type, value] : attrs) {
    nlattr a{static_cast<uint16_t>(NLA_HDRLEN + value.size() + 1), type};
    size_t at = m.size();
    m.resize(at + NLA_ALIGN(a.nla_len), 0);
    std::memcpy(m.data() + at, &a, sizeof a);
    std::memcpy(m.data() + at + NLA_HDRLEN, value.c_str(), value.size() + 1);
  }
  reinterpret_cast<nlmsghdr*>(m.data())->nlmsg_len = static_cast<uint32_t>(m.size());
  return m;
}
const nlmsghdr* hdr(const std::vector<char>& m) { return reinterpret_cast<const nlmsghdr*>(m.data()); }

}  // namespace

TEST_CASE("cache scope: objects of our tables pass, other agents' tables are rejected by family and name") {
  std::vector<ScopedTable> scope{{NFPROTO_IPV4, "kube-proxy"}, {NFPROTO_IPV6, "kube-proxy"}};
  CHECK(messageInScope(hdr(nftMessage(NFPROTO_IPV4, {{1, "kube-proxy"}, {3, "chain"}})), scope));
  CHECK(messageInScope(hdr(nftMessage(NFPROTO_IPV6, {{1, "kube-proxy"}})), scope));
  CHECK_FALSE(messageInScope(hdr(nftMessage(NFPROTO_INET, {{1, "kube-proxy"}})), scope));
  CHECK_FALSE(messageInScope(hdr(nftMessage(NFPROTO_IPV4, {{1, "kube-proxy2"}})), scope));
  CHECK_FALSE(messageInScope(hdr(nftMessage(NFPROTO_IPV4, {{1, "kube-prox"}})), scope));
  CHECK_FALSE(messageInScope(hdr(nftMessage(NFPROTO_INET, {{1, "calico"}})), scope));
  // No scope, no table name, or a message it cannot read: libnftables decides as before.
  CHECK(messageInScope(hdr(nftMessage(NFPROTO_INET, {{1, "calico"}})), {}));
  CHECK(messageInScope(hdr(nftMessage(NFPROTO_INET, {{2, "x"}})), scope));
  auto cut = nftMessage(NFPROTO_INET, {{1, "calico"}});
  reinterpret_cast<nlmsghdr*>(cut.data())->nlmsg_len = NLMSG_HDRLEN + 6;  // attribute cut short
  CHECK(messageInScope(hdr(cut), scope));
}

TEST_CASE("helper protocol: requests and answers round-trip; malformed ones are refused") {
  const std::string list = encodeNftRequest(NftOp::List, "{\"nftables\":[]}");
  REQUIRE(decodeNftRequestOp(list));
  CHECK((*decodeNftRequestOp(list) == NftOp::List));
  CHECK(requestText(list) == "{\"nftables\":[]}");
  CHECK(requestText(list).data()[requestText(list).size()] == '\0');  // libnftables reads it as a C string
  CHECK((decodeNftRequestOp(encodeNftRequest(NftOp::Check, "{}")) == NftOp::Check));  // the dry-run op
  const std::string prepare = encodeNftRequest(NftOp::Prepare, "2500000");  // a cold commit's announcement
  CHECK((decodeNftRequestOp(prepare) == NftOp::Prepare));
  CHECK(requestText(prepare) == "2500000");
  CHECK_FALSE(decodeNftRequestOp(""));
  CHECK_FALSE(decodeNftRequestOp("xabc"));
  NftAnswer a{false, "out", "Error: No such file or directory"};
  auto back = decodeNftAnswer(encodeNftAnswer(a));
  REQUIRE(back);
  CHECK_FALSE(back->ok);
  CHECK(back->output == "out");
  CHECK(back->error == a.error);
  CHECK_FALSE(decodeNftAnswer("1\xff\xff\xff\x7f"));  // error length beyond the frame
  CHECK_FALSE(decodeNftAnswer("2"));
  CHECK(nftHelperArgv("/x", 42, {{Family::IPv4, "kube-proxy"}, {Family::IPv6, "t"}}) ==
        std::vector<std::string>{"/x", kNftHelperSubcommand, "parent:42", "ip:kube-proxy", "ip6:t"});
}

TEST_CASE("supervised helper: answers come back; a crash or exit fails one call and the next starts a new one") {
  using namespace std::chrono_literals;
  SupervisedHelper echo({"/bin/sh", "-c", "exec cat <&3 >&3"}, 10s);
  std::string error;
  auto answer = echo.call(std::string("hello\0world", 11), &error);
  REQUIRE(answer);
  CHECK(*answer == std::string("hello\0world", 11));
  CHECK(echo.call(std::string(300000, 'x'), &error) == std::string(300000, 'x'));  // bigger than a socket buffer
  CHECK(echo.starts() == 1);

  SupervisedHelper crashing({"/bin/sh", "-c", "kill -SEGV $$"}, 10s);
  CHECK_FALSE(crashing.call("commit", &error));
  CHECK(error.find("signal 11") != std::string::npos);
  CHECK(crashing.pid() == 0);
  CHECK_FALSE(crashing.call("again", &error));
  CHECK(crashing.starts() == 2);

  // A recycled child is replaced by a new one on the next call.
  pid_t first = echo.pid();
  echo.recycle();
  CHECK(echo.pid() == 0);
  CHECK(echo.call("x", &error) == std::string("x"));
  CHECK(echo.pid() != first);
  CHECK(echo.starts() == 2);

  SupervisedHelper exiting({"/bin/sh", "-c", "exit 7"}, 10s);
  CHECK_FALSE(exiting.call("commit", &error));
  CHECK(error == "exited with status 7");

  SupervisedHelper missing({"/nonexistent/helper"}, 10s);
  CHECK_FALSE(missing.call("commit", &error));
  CHECK(error.find("cannot start the helper /nonexistent/helper") != std::string::npos);
}

TEST_CASE("supervised helper: a request written in pieces arrives as one request") {
  using namespace std::chrono_literals;
  // cat echoes the pieces as they were framed; the reader joins them into the one frame it reads.
  SupervisedHelper echo({"/bin/sh", "-c", "exec cat <&3 >&3"}, 10s);
  std::string error;
  const std::vector<std::string> pieces = {"c{\"nftables\":[", std::string(300000, 'x'), "", "]}"};
  auto answer = echo.callInPieces(
      [&](const SupervisedHelper::PieceWriter& write) {
        for (size_t i = 0; i < pieces.size(); ++i)
          if (!write(pieces[i], i + 1 < pieces.size())) return false;
        return true;
      },
      &error);
  REQUIRE(answer);
  CHECK(*answer == pieces[0] + pieces[1] + pieces[3]);
  CHECK(echo.starts() == 1);

  // A producer whose write failed (the child is gone) fails the call; the next call starts anew.
  SupervisedHelper exiting({"/bin/sh", "-c", "exit 3"}, 10s);
  int writes = 0;
  CHECK_FALSE(exiting.callInPieces(
      [&](const SupervisedHelper::PieceWriter& write) {
        for (int i = 0; i < 100; ++i, ++writes)
          if (!write(std::string(100000, 'y'), true)) return false;
        return write("", false);
      },
      &error));
  CHECK(writes < 100);  // it stopped at the first failed write
  CHECK(error == "exited with status 3");
}

TEST_CASE("malloc tunables: ours are added to the environment's GLIBC_TUNABLES, never overriding the operator's") {
  const std::string ours = "glibc.malloc.mxfast=0";
  CHECK(environmentWithMallocTunables({"PATH=/bin"}) == std::vector<std::string>{"PATH=/bin", "GLIBC_TUNABLES=" + ours});
  CHECK(environmentWithMallocTunables({"GLIBC_TUNABLES=glibc.malloc.arena_max=2", "HOME=/"}) ==
        std::vector<std::string>{"GLIBC_TUNABLES=glibc.malloc.arena_max=2:" + ours, "HOME=/"});
  CHECK(environmentWithMallocTunables({"GLIBC_TUNABLES="}) == std::vector<std::string>{"GLIBC_TUNABLES=" + ours});
  // The operator's own values win, wherever they stand in the list.
  CHECK(environmentWithMallocTunables({"GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mxfast=64"}) ==
        std::vector<std::string>{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mxfast=64"});
  // A variable that only starts with the name is not it.
  CHECK(environmentWithMallocTunables({"GLIBC_TUNABLESX=1"}) ==
        std::vector<std::string>{"GLIBC_TUNABLESX=1", "GLIBC_TUNABLES=" + ours});
}

TEST_CASE("malloc tunables: the value of GLIBC_TUNABLES, each of the operator's values winning") {
  CHECK(withMallocTunables(std::nullopt) == "glibc.malloc.mxfast=0");
  CHECK(withMallocTunables("") == "glibc.malloc.mxfast=0");
  CHECK(withMallocTunables("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.mxfast=0");
  // Huge pages are the operator's to ask for (malloc_tunables.h says why they are not ours); ours is added.
  CHECK(withMallocTunables("glibc.malloc.hugetlb=1") == "glibc.malloc.hugetlb=1:glibc.malloc.mxfast=0");
  // Ours given: kept as it is.
  CHECK(withMallocTunables("glibc.malloc.mxfast=64") == "glibc.malloc.mxfast=64");
  CHECK(withMallocTunables("glibc.malloc.hugetlb=2:glibc.malloc.arena_max=2") ==
        "glibc.malloc.hugetlb=2:glibc.malloc.arena_max=2:glibc.malloc.mxfast=0");
  CHECK(withMallocTunables("glibc.malloc.arena_max=2:glibc.malloc.mxfast=0:glibc.malloc.hugetlb=1") ==
        "glibc.malloc.arena_max=2:glibc.malloc.mxfast=0:glibc.malloc.hugetlb=1");
  // A name that merely ends like ours is another tunable; a name without a value names none.
  CHECK(withMallocTunables("x.glibc.malloc.mxfast=64") == "x.glibc.malloc.mxfast=64:glibc.malloc.mxfast=0");
  CHECK(withMallocTunables("glibc.malloc.mxfast") == "glibc.malloc.mxfast:glibc.malloc.mxfast=0");
}

TEST_CASE("malloc tunables: a daemon that could not re-execute itself still starts its helpers with them") {
  using namespace std::chrono_literals;
  // The child answers with one frame (a little-endian length word, then the text) holding its
  // GLIBC_TUNABLES, then drains its socket.
  const std::string answerTunables =
      "v=\"$GLIBC_TUNABLES\"; printf \"$(printf '\\\\%03o' ${#v})\\000\\000\\000%s\" \"$v\" >&3; cat <&3 >/dev/null";
  const char* saved = ::getenv("GLIBC_TUNABLES");
  const std::optional<std::string> before = saved ? std::optional<std::string>(saved) : std::nullopt;
  auto helperSees = [&](const char* tunables) {
    if (tunables) ::setenv("GLIBC_TUNABLES", tunables, 1);
    else ::unsetenv("GLIBC_TUNABLES");
    setMallocTunablesForChildren();
    std::string error;
    SupervisedHelper helper({"/bin/sh", "-c", answerTunables}, 10s);
    return helper.call("x", &error).value_or("no answer: " + error);
  };
  CHECK(helperSees(nullptr) == "glibc.malloc.mxfast=0");
  CHECK(helperSees("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.mxfast=0");
  // The operator turned huge pages on and kept fastbins.
  CHECK(helperSees("glibc.malloc.hugetlb=1:glibc.malloc.mxfast=64") == "glibc.malloc.hugetlb=1:glibc.malloc.mxfast=64");
  if (before) ::setenv("GLIBC_TUNABLES", before->c_str(), 1);
  else ::unsetenv("GLIBC_TUNABLES");
}

TEST_CASE("frames: pieces are joined up to the reader's limit, counted over all pieces") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  REQUIRE(writeFramePiece(sv[0], "abc", true));
  REQUIRE(writeFramePiece(sv[0], "def", false));
  REQUIRE(writeFrame(sv[0], "g"));
  std::string frame;
  REQUIRE(readFrame(sv[1], &frame, 6));
  CHECK(frame == "abcdef");
  REQUIRE(readFrame(sv[1], &frame, 6));
  CHECK(frame == "g");
  // Two pieces of 4 bytes are over a limit of 6 although each piece is within it.
  REQUIRE(writeFramePiece(sv[0], "1234", true));
  REQUIRE(writeFramePiece(sv[0], "5678", false));
  CHECK_FALSE(readFrame(sv[1], &frame, 6));
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST_CASE("supervised helper: a helper that hangs is killed after the call timeout") {
  using namespace std::chrono_literals;
  SupervisedHelper hanging({"/bin/sh", "-c", "exec sleep 30"}, 300ms);
  std::string error;
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(hanging.call("commit", &error));
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  CHECK(error.find("did not answer within 300 ms") != std::string::npos);
  CHECK(error.find("signal 9") != std::string::npos);
}

TEST_CASE("nft runner: a helper that cannot work fails each commit with the reason, and the caller goes on") {
  NftRunnerOptions opt;
  opt.executable = "/bin/false";
  NftRunner runner(opt);
  Transaction txn;
  txn.addTable(Family::IPv4, "kube-proxy");
  for (int i = 0; i < 2; ++i) {
    RunResult r = runner.commit(txn);
    CHECK_FALSE(r.ok);
    CHECK(r.error == "libnftables helper exited with status 1");
  }
  CHECK(runner.helperStarts() == 2);
  ListedTable listed;
  CHECK_FALSE(runner.list(Family::IPv4, "kube-proxy", &listed).ok);
}
