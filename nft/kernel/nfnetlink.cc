#include "nft/kernel/nfnetlink.h"

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <endian.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace kpn::nft::nfnl {

namespace {

// The attribute of `type` among those packed in [p, end).
const nlattr* findIn(const char* p, const char* end, int type) {
  while (p + NLA_HDRLEN <= end) {
    const auto* a = reinterpret_cast<const nlattr*>(p);
    if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end) return nullptr;
    if ((a->nla_type & NLA_TYPE_MASK) == type) return a;
    p += NLA_ALIGN(a->nla_len);
  }
  return nullptr;
}

}  // namespace

const nlattr* findAttr(const nlmsghdr* h, int type) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) return nullptr;
  return findIn(reinterpret_cast<const char*>(NLMSG_DATA(h)) + NLMSG_ALIGN(sizeof(nfgenmsg)),
                reinterpret_cast<const char*>(h) + h->nlmsg_len, type);
}

const nlattr* findNested(const nlattr* parent, int type) {
  return findIn(reinterpret_cast<const char*>(parent) + NLA_HDRLEN,
                reinterpret_cast<const char*>(parent) + parent->nla_len, type);
}

std::string stringAttr(const nlattr* a) {
  const char* s = reinterpret_cast<const char*>(a) + NLA_HDRLEN;
  size_t n = a->nla_len - NLA_HDRLEN;
  return std::string(s, strnlen(s, n));
}

uint32_t be32Attr(const nlattr* a) {
  if (a->nla_len < NLA_HDRLEN + 4) return 0;
  uint32_t be;
  std::memcpy(&be, reinterpret_cast<const char*>(a) + NLA_HDRLEN, 4);
  return be32toh(be);
}

namespace {

std::string errnoText(const char* what) { return std::string(what) + ": " + strerror(errno); }

// One socket per thread, kept open. Closing a NETLINK_NETFILTER socket that ever sent a request
// makes the kernel (nft_rcv_nl_event; measured on 6.18) flush nf_tables' pending destroy work,
// which waits out an RCU grace period whenever the last commit deleted anything: ~10 ms on this
// VM kind. A socket per request (the generation read right after each commit) put that wait into
// every commit that removed an endpoint or a service.
//
// A socket talks to the network namespace it was made in, and a forked child shares its parent's:
// after either changes (tests fork into namespaces of their own) the thread makes a new one.
class Socket {
 public:
  ~Socket() { reset(); }
  int get(std::string* error) {
    const ino_t netns = currentNetns();
    if (fd_ >= 0 && (pid_ != getpid() || netns_ != netns)) reset();
    if (fd_ >= 0) return fd_;
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd_ < 0) return *error = errnoText("netlink socket"), -1;
    pid_ = getpid();
    netns_ = netns;
    timeval tv{2, 0};  // a kernel answer never takes this long; never block the sync loop for good
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd_;
  }
  // After a failure the socket may hold the rest of an answer nobody reads: start afresh.
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  uint32_t nextSeq() { return ++seq_; }

 private:
  static ino_t currentNetns() {
    struct stat st {};
    return stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
  }
  int fd_ = -1;
  pid_t pid_ = 0;
  ino_t netns_ = 0;
  uint32_t seq_ = 0;
};

thread_local Socket tSocket;

bool exchange(int fd, uint32_t seq, int msgType, int family, bool dump, const std::function<void(const nlmsghdr*)>& each,
              std::string* error) {
  struct {
    nlmsghdr h;
    nfgenmsg g;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(nfgenmsg));
  req.h.nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | msgType);
  req.h.nlmsg_flags = NLM_F_REQUEST | (dump ? NLM_F_DUMP : NLM_F_ACK);
  req.h.nlmsg_seq = seq;
  req.g.nfgen_family = static_cast<uint8_t>(family);
  req.g.version = NFNETLINK_V0;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return *error = errnoText("netlink send"), false;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return *error = errnoText("netlink receive"), false;
    }
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != seq) continue;  // a late part of an earlier answer
      if (h->nlmsg_type == NLMSG_DONE) return true;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(h));
        if (e->error == 0) return true;  // the ack of a plain request
        return *error = std::string("netlink: ") + strerror(-e->error), false;
      }
      each(h);
      if (!dump) return true;  // a plain request has one answer
    }
  }
}

}  // namespace

bool request(int msgType, int family, bool dump, const std::function<void(const nlmsghdr*)>& each, std::string* error) {
  const int fd = tSocket.get(error);
  if (fd < 0) return false;
  if (exchange(fd, tSocket.nextSeq(), msgType, family, dump, each, error)) return true;
  tSocket.reset();
  return false;
}

}  // namespace kpn::nft::nfnl
