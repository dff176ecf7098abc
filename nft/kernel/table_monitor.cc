#include "nft/kernel/table_monitor.h"

#include "nft/kernel/fingerprint_reader.h"
#include "nft/kernel/nfnetlink.h"

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

}  // namespace

TableMonitor::TableMonitor(std::set<std::pair<Family, std::string>> tables) : tables_(std::move(tables)) {
  fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "netlink socket");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  int group = NFNLGRP_NFTABLES;
  // A flush of a big table is one event per object. FORCE (we have CAP_NET_ADMIN) passes
  // net.core.rmem_max (~200 KiB by default, a few hundred events); without it, the plain
  // option's capped value. Bigger commits overflow anyway: see noteOwnCommit.
  int big = 4 << 20;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0 ||
      setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) {
    int e = errno;
    close(fd_);
    throw std::system_error(e, std::generic_category(), "nftables event subscription");
  }
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  std::string error;
  accounted_ = readGeneration(&error);
  if (!accounted_) LOG(WARNING) << "cannot read the nftables generation (" << error << "); any lost event means a repair";
}

bool onlyOwnCommitsSince(uint32_t accounted, uint32_t now, const std::set<uint32_t>& own) {
  if (now < accounted) return false;  // wrapped around (or a confused reading): cannot tell
  for (uint64_t g = uint64_t(accounted) + 1; g <= now; ++g)
    if (!own.count(static_cast<uint32_t>(g))) return false;
  return true;
}

void TableMonitor::noteOwnCommit(uint32_t generation) {
  if (!accounted_ || generation > *accounted_) ownGenerations_.insert(generation);
  if (ownGenerations_.size() > kMaxOwn) ownGenerations_.erase(ownGenerations_.begin());
}

void TableMonitor::deafen() {
  int group = NFNLGRP_NFTABLES;
  if (deaf_ || setsockopt(fd_, SOL_NETLINK, NETLINK_DROP_MEMBERSHIP, &group, sizeof group) < 0) return;
  deaf_ = true;
  missed_ = true;
}

void TableMonitor::listen() {
  int group = NFNLGRP_NFTABLES;
  if (!deaf_) return;
  if (setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) {
    LOG(WARNING) << "nftables event subscription: " << std::strerror(errno)
                 << ": outside changes to our tables are repaired by periodic syncs only";
    return;
  }
  deaf_ = false;
  batchTouchesOurs_ = false;  // a batch whose end we did not hear
  // The usual case at once: only our commit in the window. Otherwise the window stays missed and
  // the next drain() (the next event in the namespace) or the syncer's periodic fingerprint
  // check finds the damage.
  std::string error;
  std::optional<uint32_t> now = readGeneration(&error);
  if (now && accounted_ && onlyOwnCommitsSince(*accounted_, *now, ownGenerations_)) {
    VLOG(2) << "nftables events missed while deaf during our own big commit (generations " << *accounted_ + 1
            << ".." << *now << "); nobody else committed";
    accounted_ = now;
    missed_ = false;
    // ownGenerations_ keeps the window's generations until the next drain(): events of a commit
    // before deafen() may still wait in the socket.
  }
}

std::unique_ptr<TableMonitor> TableMonitor::forTablesOf(const Ruleset& rs) {
  std::set<std::pair<Family, std::string>> tables;
  for (const Table& t : rs.tables) tables.emplace(t.family, t.name);
  try {
    return std::make_unique<TableMonitor>(std::move(tables));
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

bool TableMonitor::drain() {
  bool damaged = false, lost = missed_ && !deaf_;
  if (lost) missed_ = false;
  alignas(nlmsghdr) char buf[65536];
  for (;;) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // events were dropped: decided below, once the socket is empty
        lost = true;
        batchTouchesOurs_ = false;
        continue;
      }
      break;  // EAGAIN: drained
    }
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
      if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES) continue;
      int msg = h->nlmsg_type & 0xff;
      if (msg == NFT_MSG_NEWGEN) {
        const nlattr* id = nfnl::findAttr(h, NFTA_GEN_ID);
        uint32_t gen = id ? nfnl::be32Attr(id) : 0;
        if (batchTouchesOurs_ && !(id && ownGenerations_.count(gen))) damaged = true;
        batchTouchesOurs_ = false;
        if (accounted_ && gen == *accounted_ + 1) accounted_ = gen;
        else if (accounted_ && gen > *accounted_) lost = true;  // a generation without its event
        continue;
      }
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) continue;
      const auto* g = reinterpret_cast<const nfgenmsg*>(NLMSG_DATA(h));
      const nlattr* t = nfnl::findAttr(h, kTableAttr);
      if (t && ours(g->nfgen_family, nfnl::stringAttr(t))) batchTouchesOurs_ = true;
    }
  }
  if (lost) {
    // Commits after this reading have their events whole in the (now empty) socket.
    std::string error;
    std::optional<uint32_t> now = readGeneration(&error);
    bool ours = now && accounted_ && onlyOwnCommitsSince(*accounted_, *now, ownGenerations_);
    if (ours) {
      VLOG(2) << "nftables events overflowed during our own commits (generations " << *accounted_ + 1 << ".." << *now
              << "); nobody else committed";
    } else {
      LOG(WARNING) << "nftables events overflowed while another process may have committed"
                   << (now ? "" : " (" + error + ")") << "; verifying our tables against the kernel";
      damaged = true;
    }
    accounted_ = now;
  }
  if (accounted_) ownGenerations_.erase(ownGenerations_.begin(), ownGenerations_.upper_bound(*accounted_));
  return damaged;
}

}  // namespace kpn::nft
