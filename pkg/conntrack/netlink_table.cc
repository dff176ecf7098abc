#include "pkg/conntrack/netlink_table.h"

#include <errno.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace kpn::conntrack {

namespace {

// One message's room in a batch: a delete or create of one entry is ~150 bytes.
constexpr size_t kSlot = 512;

std::string errnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void copyAddr(const nf_conntrack* ct, int v4attr, int v6attr, uint8_t family, Ip* out) {
  if (family == AF_INET) {
    if (const void* p = nfct_get_attr(ct, static_cast<nf_conntrack_attr>(v4attr))) std::memcpy(out->bytes.data(), p, 4);
  } else if (const void* p = nfct_get_attr(ct, static_cast<nf_conntrack_attr>(v6attr))) {
    std::memcpy(out->bytes.data(), p, 16);
  }
}

// A flow's original (and optionally reply) tuple as a libnetfilter-conntrack object.
nf_conntrack* toConntrack(const Flow& f, const Flow* reply) {
  nf_conntrack* ct = nfct_new();
  if (!ct) return nullptr;
  nfct_set_attr_u8(ct, ATTR_L3PROTO, f.family);
  nfct_set_attr_u8(ct, ATTR_L4PROTO, f.proto);
  if (f.family == AF_INET) {
    nfct_set_attr(ct, ATTR_ORIG_IPV4_SRC, f.origSrc.bytes.data());
    nfct_set_attr(ct, ATTR_ORIG_IPV4_DST, f.origDst.bytes.data());
  } else {
    nfct_set_attr(ct, ATTR_ORIG_IPV6_SRC, f.origSrc.bytes.data());
    nfct_set_attr(ct, ATTR_ORIG_IPV6_DST, f.origDst.bytes.data());
  }
  nfct_set_attr_u16(ct, ATTR_ORIG_PORT_SRC, htons(f.origSport));
  nfct_set_attr_u16(ct, ATTR_ORIG_PORT_DST, htons(f.origDport));
  if (reply) {
    // The reply tuple: reply->origSrc/origDst/ports are the reply direction's source and destination.
    nfct_set_attr_u8(ct, ATTR_REPL_L3PROTO, f.family);
    nfct_set_attr_u8(ct, ATTR_REPL_L4PROTO, f.proto);
    if (f.family == AF_INET) {
      nfct_set_attr(ct, ATTR_REPL_IPV4_SRC, reply->origSrc.bytes.data());
      nfct_set_attr(ct, ATTR_REPL_IPV4_DST, reply->origDst.bytes.data());
    } else {
      nfct_set_attr(ct, ATTR_REPL_IPV6_SRC, reply->origSrc.bytes.data());
      nfct_set_attr(ct, ATTR_REPL_IPV6_DST, reply->origDst.bytes.data());
    }
    nfct_set_attr_u16(ct, ATTR_REPL_PORT_SRC, htons(reply->origSport));
    nfct_set_attr_u16(ct, ATTR_REPL_PORT_DST, htons(reply->origDport));
  }
  if (reply && f.proto == IPPROTO_TCP) nfct_set_attr_u8(ct, ATTR_TCP_STATE, TCP_CONNTRACK_ESTABLISHED);
  if (f.zone) nfct_set_attr_u16(ct, ATTR_ZONE, *f.zone);
  if (f.id) nfct_set_attr_u32(ct, ATTR_ID, *f.id);
  return ct;
}

}  // namespace

bool toFlow(const nf_conntrack* ct, uint8_t proto, Flow* out) {
  Flow f;
  if (nfct_get_attr_u8(ct, ATTR_ORIG_L4PROTO) != proto) return false;
  f.family = nfct_get_attr_u8(ct, ATTR_ORIG_L3PROTO);
  if (f.family != AF_INET && f.family != AF_INET6) return false;
  f.proto = proto;
  copyAddr(ct, ATTR_ORIG_IPV4_SRC, ATTR_ORIG_IPV6_SRC, f.family, &f.origSrc);
  copyAddr(ct, ATTR_ORIG_IPV4_DST, ATTR_ORIG_IPV6_DST, f.family, &f.origDst);
  copyAddr(ct, ATTR_REPL_IPV4_SRC, ATTR_REPL_IPV6_SRC, f.family, &f.replySrc);
  f.origSport = ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC));
  f.origDport = ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST));
  f.replySport = ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC));
  f.replied = (nfct_get_attr_u32(ct, ATTR_STATUS) & IPS_SEEN_REPLY) != 0;
  if (proto == IPPROTO_TCP && nfct_attr_is_set(ct, ATTR_TCP_STATE) > 0) f.state = nfct_get_attr_u8(ct, ATTR_TCP_STATE);
  if (proto == IPPROTO_SCTP && nfct_attr_is_set(ct, ATTR_SCTP_STATE) > 0) f.state = nfct_get_attr_u8(ct, ATTR_SCTP_STATE);
  if (nfct_attr_is_set(ct, ATTR_ZONE) > 0) f.zone = nfct_get_attr_u16(ct, ATTR_ZONE);
  if (nfct_attr_is_set(ct, ATTR_ID) > 0) f.id = nfct_get_attr_u32(ct, ATTR_ID);
  *out = f;
  return true;
}

void clearOptionalAttrs(nf_conntrack* ct) {
  nfct_attr_unset(ct, ATTR_ZONE);
  nfct_attr_unset(ct, ATTR_ID);
  nfct_attr_unset(ct, ATTR_STATUS);
  nfct_attr_unset(ct, ATTR_TCP_STATE);
  nfct_attr_unset(ct, ATTR_SCTP_STATE);
}

namespace {

// Appends netlink attributes to a message in a buffer large enough for them (a dump request).
struct AttrWriter {
  nlmsghdr* nlh;
  nlattr* put(uint16_t type, const void* data, uint16_t len) {
    auto* a = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(nlh) + NLMSG_ALIGN(nlh->nlmsg_len));
    a->nla_type = type;
    a->nla_len = static_cast<uint16_t>(NLA_HDRLEN + len);
    if (len) std::memcpy(reinterpret_cast<char*>(a) + NLA_HDRLEN, data, len);
    nlh->nlmsg_len = NLMSG_ALIGN(nlh->nlmsg_len) + NLA_ALIGN(a->nla_len);
    return a;
  }
  nlattr* begin(uint16_t type) { return put(type | NLA_F_NESTED, nullptr, 0); }
  void end(nlattr* a) {
    a->nla_len = static_cast<uint16_t>(reinterpret_cast<char*>(nlh) + nlh->nlmsg_len - reinterpret_cast<char*>(a));
  }
};

// Reads netlink messages from fd into one buffer until onMessage returns false. False (and
// *error) when a receive fails (the socket's 5 s timeout included).
bool readMessages(int fd, const char* what, std::string* error, const std::function<bool(const nlmsghdr*)>& onMessage) {
  std::vector<char> in(64 * 1024);
  for (;;) {
    ssize_t n = recv(fd, in.data(), in.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errnoText(what);
      return false;
    }
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(in.data()); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len))
      if (!onMessage(h)) return true;
  }
}

// The kernel's CTA_FILTER_F_CTA_PROTO_NUM (net/netfilter/nf_internals.h: ABI, not exported).
constexpr uint32_t kFilterProtoNum = 1u << 3;

}  // namespace

namespace {
int openNetlink(std::string* error) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = errnoText("netlink socket");
    if (fd >= 0) close(fd);
    return -1;
  }
  // A kernel that never answers must not hang the worker.
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}
}  // namespace

std::unique_ptr<NetlinkFlowTable> NetlinkFlowTable::open(std::string* error) {
  int dumpFd = openNetlink(error);
  if (dumpFd < 0) return nullptr;
  int fd = openNetlink(error);
  if (fd < 0) {
    close(dumpFd);
    return nullptr;
  }
  // Acks carry only the header of the message they answer, not its payload.
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  // Room for a whole batch of answers, errors with their payload included.
  int rcv = static_cast<int>(kDeleteBatch * kSlot * 2);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
  return std::unique_ptr<NetlinkFlowTable>(new NetlinkFlowTable(dumpFd, fd));
}

std::unique_ptr<FlowTable> openKernelFlowTable(std::string* error) { return NetlinkFlowTable::open(error); }

NetlinkFlowTable::~NetlinkFlowTable() {
  close(batchFd_);
  close(dumpFd_);
}

bool NetlinkFlowTable::dump(uint8_t family, uint8_t proto, const std::function<bool(const Flow&)>& fn,
                            std::string* error) {
  bool refused = false;
  if (kernelProtoFilter_) {
    if (dumpOnce(family, proto, true, fn, error, &refused) || !refused) return error->empty();
    kernelProtoFilter_ = false;  // an older kernel: the family filter alone from now on
    error->clear();
  }
  return dumpOnce(family, proto, false, fn, error, &refused);
}

bool NetlinkFlowTable::dumpOnce(uint8_t family, uint8_t proto, bool protoFilter,
                                const std::function<bool(const Flow&)>& fn, std::string* error, bool* refused) {
  alignas(nlmsghdr) char req[256] = {};
  auto* nlh = reinterpret_cast<nlmsghdr*>(req);
  nlh->nlmsg_len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  const uint32_t seq = nlh->nlmsg_seq = seq_++;
  auto* nfg = reinterpret_cast<nfgenmsg*>(req + NLMSG_HDRLEN);
  nfg->nfgen_family = family;  // the kernel's family filter
  nfg->version = NFNETLINK_V0;
  if (protoFilter) {
    AttrWriter w{nlh};
    nlattr* tuple = w.begin(CTA_TUPLE_ORIG);
    nlattr* tupleProto = w.begin(CTA_TUPLE_PROTO);
    w.put(CTA_PROTO_NUM, &proto, sizeof proto);
    w.end(tupleProto);
    w.end(tuple);
    nlattr* filter = w.begin(CTA_FILTER);
    w.put(CTA_FILTER_ORIG_FLAGS, &kFilterProtoNum, sizeof kFilterProtoNum);
    w.end(filter);
  }
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(dumpFd_, req, nlh->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    *error = errnoText("conntrack dump request");
    return false;
  }
  // One entry object reused (and readMessages' one buffer): nothing grows with the table.
  std::unique_ptr<nf_conntrack, void (*)(nf_conntrack*)> ct(nfct_new(), nfct_destroy);
  if (!ct) {
    *error = errnoText("nfct_new");
    return false;
  }
  bool ok = true;
  bool read = readMessages(dumpFd_, "conntrack dump", error, [&](const nlmsghdr* h) {
    if (h->nlmsg_seq != seq) return true;  // an answer to an earlier, abandoned dump
    if (h->nlmsg_type == NLMSG_DONE) return false;
    if (h->nlmsg_type == NLMSG_ERROR) {
      int e = -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
      if (e == 0) return true;
      *refused = protoFilter && (e == EINVAL || e == EOPNOTSUPP);
      errno = e;
      *error = errnoText("conntrack dump");
      ok = false;
      return false;
    }
    ++received_;
    Flow f;
    // Parsing sets what the message has: clear the optional attributes the previous one set.
    clearOptionalAttrs(ct.get());
    if (nfct_nlmsg_parse(h, ct.get()) < 0 || !toFlow(ct.get(), proto, &f)) return true;
    // Stopped: the rest of the dump stays in the socket; the caller drops this table.
    return fn(f);
  });
  return read && ok;
}

size_t NetlinkFlowTable::sendBatch(uint16_t msgType, uint16_t flags, size_t count,
                                   const std::function<bool(size_t, nlmsghdr*)>& build, std::string* error) {
  if (count == 0) return 0;
  std::vector<char> buf(count * kSlot);
  std::vector<char> slot(kSlot);
  size_t used = 0, sent = 0;
  const uint32_t firstSeq = seq_;
  for (size_t i = 0; i < count; ++i) {
    std::memset(slot.data(), 0, slot.size());
    auto* nlh = reinterpret_cast<nlmsghdr*>(slot.data());
    nlh->nlmsg_len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
    nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | msgType;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    nlh->nlmsg_seq = seq_++;
    if (!build(i, nlh)) continue;
    if (nlh->nlmsg_len > kSlot) continue;  // cannot happen for one tuple; never overrun the batch
    std::memcpy(buf.data() + used, slot.data(), nlh->nlmsg_len);
    used += NLMSG_ALIGN(nlh->nlmsg_len);
    ++sent;
  }
  if (sent == 0) return 0;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(batchFd_, buf.data(), used, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    *error = errnoText("conntrack batch send");
    return 0;
  }
  // One answer per message: error 0 is success, ENOENT an entry that is already gone.
  size_t answered = 0, ok = 0;
  readMessages(batchFd_, "conntrack batch answers", error, [&](const nlmsghdr* h) {
    if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq < firstSeq || h->nlmsg_seq >= seq_) return true;
    ++answered;
    int e = static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
    if (e == 0) {
      ++ok;
    } else if (e != -ENOENT && error->empty()) {
      errno = -e;
      *error = errnoText("conntrack batch");
    }
    return answered < sent;
  });
  return ok;
}

size_t NetlinkFlowTable::destroy(const std::vector<Flow>& flows, std::string* error) {
  return sendBatch(IPCTNL_MSG_CT_DELETE, 0, flows.size(), [&](size_t i, nlmsghdr* nlh) {
    const Flow& f = flows[i];
    auto* nfg = reinterpret_cast<nfgenmsg*>(reinterpret_cast<char*>(nlh) + NLMSG_HDRLEN);
    nfg->nfgen_family = f.family;
    nfg->version = NFNETLINK_V0;
    nf_conntrack* ct = toConntrack(f, nullptr);
    if (!ct) return false;
    bool ok = nfct_nlmsg_build(nlh, ct) == 0;
    nfct_destroy(ct);
    return ok;
  }, error);
}

size_t NetlinkFlowTable::create(const std::vector<std::pair<Flow, Flow>>& origReply, uint32_t timeoutSeconds,
                                std::string* error) {
  return sendBatch(IPCTNL_MSG_CT_NEW, NLM_F_CREATE | NLM_F_EXCL, origReply.size(), [&](size_t i, nlmsghdr* nlh) {
    const auto& [orig, reply] = origReply[i];
    auto* nfg = reinterpret_cast<nfgenmsg*>(reinterpret_cast<char*>(nlh) + NLMSG_HDRLEN);
    nfg->nfgen_family = orig.family;
    nfg->version = NFNETLINK_V0;
    nf_conntrack* ct = toConntrack(orig, &reply);
    if (!ct) return false;
    nfct_set_attr_u32(ct, ATTR_TIMEOUT, timeoutSeconds);
    bool ok = nfct_nlmsg_build(nlh, ct) == 0;
    nfct_destroy(ct);
    return ok;
  }, error);
}

}  // namespace kpn::conntrack
