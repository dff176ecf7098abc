#include "nft/table_monitor.h"

#include "nft/nfnetlink.h"

#include <glog/logging.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace kpn::nft {
namespace {

int nfprotoOf(Family f) { return f == Family::IPv4 ? NFPROTO_IPV4 : NFPROTO_IPV6; }

// Attribute 1 of every table-scoped message (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, NFTA_SET_TABLE,
// NFTA_RULE_TABLE, NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE, NFTA_FLOWTABLE_TABLE) is the table.
constexpr int kTableAttr = 1;

// The generation event names the thread that committed (0 when it does not say).
uint32_t committerOf(const nlmsghdr* h) {
  const nlattr* pid = nfnl::findAttr(h, NFTA_GEN_PROC_PID);
  return pid ? nfnl::be32Attr(pid) : 0;
}

}  // namespace

TableMonitor::TableMonitor(std::set<std::pair<Family, std::string>> tables, OwnCommitter ownCommitter)
    : tables_(std::move(tables)), ownCommitter_(std::move(ownCommitter)) {
  fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "netlink socket");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  int group = NFNLGRP_NFTABLES;
  int big = 4 << 20;  // a flush of a big table is one event per object
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0 ||
      setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) {
    int e = errno;
    close(fd_);
    throw std::system_error(e, std::generic_category(), "nftables event subscription");
  }
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
}

std::unique_ptr<TableMonitor> TableMonitor::forTablesOf(const Ruleset& rs, OwnCommitter ownCommitter) {
  std::set<std::pair<Family, std::string>> tables;
  for (const Table& t : rs.tables) tables.emplace(t.family, t.name);
  try {
    return std::make_unique<TableMonitor>(std::move(tables), std::move(ownCommitter));
  } catch (const std::system_error& e) {
    LOG(WARNING) << e.what() << ": outside changes to our tables are repaired by periodic syncs only";
    return nullptr;
  }
}

TableMonitor::~TableMonitor() {
  if (fd_ >= 0) close(fd_);
}

bool TableMonitor::ours(int family, const std::string& table) const {
  for (const auto& [f, name] : tables_)
    if (nfprotoOf(f) == family && name == table) return true;
  return false;
}

bool TableMonitor::committedByUs(uint32_t pid) const {
  if (pid == 0) return false;
  if (ownCommitter_ && ownCommitter_(pid)) return true;
  std::string task = "/proc/self/task/" + std::to_string(pid);
  return access(task.c_str(), F_OK) == 0;
}

bool TableMonitor::drain() {
  bool damaged = false;
  alignas(nlmsghdr) char buf[65536];
  for (;;) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // events were lost: one of them may have been someone's change
        LOG(WARNING) << "nftables events overflowed; verifying our tables against the kernel";
        damaged = true;
        batchTouchesOurs_ = false;
        continue;
      }
      break;  // EAGAIN: drained
    }
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
      if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES) continue;
      int msg = h->nlmsg_type & 0xff;
      if (msg == NFT_MSG_NEWGEN) {
        if (batchTouchesOurs_ && !committedByUs(committerOf(h))) damaged = true;
        batchTouchesOurs_ = false;
        continue;
      }
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) continue;
      const auto* g = reinterpret_cast<const nfgenmsg*>(NLMSG_DATA(h));
      const nlattr* t = nfnl::findAttr(h, kTableAttr);
      if (t && ours(g->nfgen_family, nfnl::stringAttr(t))) batchTouchesOurs_ = true;
    }
  }
  return damaged;
}

}  // namespace kpn::nft
