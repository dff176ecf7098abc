// Listens to the kernel's nftables change events (NFNLGRP_NFTABLES on a plain netlink socket)
// and says when someone else changed one of our tables: `nft flush ruleset`, a reload of the
// distribution's nftables service, an operator's edit. Our own commits are recognised by the
// process that made them (the generation event names it: a thread of ours, or our libnftables
// helper process) and ignored. Kubernetes-free; the loop polls fd() and asks drain() when it is
// readable.
//
// A commit of ours with many objects (a cold sync at 10k services is ~120k element events) overflows
// any socket buffer, and the kernel drops events. Lost events are not damage by themselves: the
// monitor tracks the ruleset generation its events account for, the syncer reports the generation
// of each commit it made (noteOwnCommit), and a loss is damage only when some commit it cannot
// account for as ours happened in the window (treating every loss as damage made each big commit
// trigger a full resync, which overflowed again: every change became a 4 s full sync at 10k).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "nft/model.h"

namespace kpn::nft {

class TableMonitor {
 public:
  // Whether the process with this id committed for us (besides this process's own threads).
  using OwnCommitter = std::function<bool(uint32_t pid)>;
  // `tables`: (family, name) of our tables. Throws std::system_error when the socket fails.
  explicit TableMonitor(std::set<std::pair<Family, std::string>> tables, OwnCommitter ownCommitter = nullptr);
  // The tables of `rs`; nullptr (with a warning) when the kernel will not let us listen.
  static std::unique_ptr<TableMonitor> forTablesOf(const Ruleset& rs, OwnCommitter ownCommitter = nullptr);
  ~TableMonitor();
  TableMonitor(const TableMonitor&) = delete;
  TableMonitor& operator=(const TableMonitor&) = delete;

  int fd() const { return fd_; }
  // Reads every pending event; true if a transaction of another process touched one of our
  // tables, or events were lost while a commit that is not ours happened (so that it may have).
  bool drain();
  // The kernel generation our commit produced (read before and after it: exactly one more), so
  // that events lost in its storm are known to be ours.
  void noteOwnCommit(uint32_t generation);

 private:
  bool ours(int family, const std::string& table) const;
  bool committedByUs(uint32_t pid) const;
  int fd_ = -1;
  OwnCommitter ownCommitter_;
  std::set<std::pair<Family, std::string>> tables_;
  bool batchTouchesOurs_ = false;  // since the last generation event
  // Every commit up to this generation was seen whole in events (or verified after a loss);
  // nullopt: unknown, so any loss is treated as damage.
  std::optional<uint32_t> accounted_;
  std::set<uint32_t> ownGenerations_;  // above accounted_
};

// Whether every generation in (accounted, now] is one of `own`: then the events lost in that
// window were all ours.
bool onlyOwnCommitsSince(uint32_t accounted, uint32_t now, const std::set<uint32_t>& own);

}  // namespace kpn::nft
