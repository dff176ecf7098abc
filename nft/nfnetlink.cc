#include "nft/nfnetlink.h"

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <endian.h>
#include <sys/socket.h>
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

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

std::string errnoText(const char* what) { return std::string(what) + ": " + strerror(errno); }

}  // namespace

bool request(int msgType, int family, bool dump, const std::function<void(const nlmsghdr*)>& each, std::string* error) {
  Fd s{socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER)};
  if (s.fd < 0) return *error = errnoText("netlink socket"), false;
  timeval tv{2, 0};  // a kernel answer never takes this long; never block the sync loop for good
  setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    nlmsghdr h;
    nfgenmsg g;
  } req{};
  const uint32_t seq = 1;
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(nfgenmsg));
  req.h.nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | msgType);
  req.h.nlmsg_flags = NLM_F_REQUEST | (dump ? NLM_F_DUMP : NLM_F_ACK);
  req.h.nlmsg_seq = seq;
  req.g.nfgen_family = static_cast<uint8_t>(family);
  req.g.version = NFNETLINK_V0;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(s.fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return *error = errnoText("netlink send"), false;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = recv(s.fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return *error = errnoText("netlink receive"), false;
    }
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != seq) continue;
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

}  // namespace kpn::nft::nfnl
