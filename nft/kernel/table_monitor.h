// Listens to the kernel's nftables change events (NFNLGRP_NFTABLES on a plain netlink socket)
// and says when someone else changed one of our tables: `nft flush ruleset`, a reload of the
// distribution's nftables service, an operator's edit. Our own commits are recognised by the
// ruleset generation each of them produced (the runner reads it before and after each change and
// tells noteOwnCommit), never by the process the kernel names: it names it by its PID in the
// initial PID namespace, which a daemon in a container (PID 1 of its own namespace, or below an
// init) cannot match with the PIDs it sees. Kubernetes-free; the loop polls fd() and asks drain()
// when it is readable.
//
// A commit of ours with many objects (a cold sync at 10k services is ~120k element events) overflows
// any socket buffer, and the kernel drops events. Lost events are not damage by themselves: the
// monitor tracks the ruleset generation its events account for, the syncer reports the generation
// of each commit it made (noteOwnCommit), and a loss is damage only when some commit it cannot
// account for as ours happened in the window (treating every loss as damage made each big commit
// trigger a full resync, which overflowed again: every change became a 4 s full sync at 10k).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "nft/model.h"

namespace kpn::nft {

class TableMonitor {
 public:
  // `tables`: (family, name) of our tables. Throws std::system_error when the socket fails.
  explicit TableMonitor(std::set<std::pair<Family, std::string>> tables);
  // The tables of `rs`; nullptr (with a warning) when the kernel will not let us listen.
  static std::unique_ptr<TableMonitor> forTablesOf(const Ruleset& rs);
  ~TableMonitor();
  TableMonitor(const TableMonitor&) = delete;
  TableMonitor& operator=(const TableMonitor&) = delete;

  int fd() const { return fd_; }
  // Reads every pending event; true if a transaction of another process touched one of our
  // tables, or events were lost while a commit that is not ours happened (so that it may have).
  bool drain();
  // The kernel generation a change of ours produced (read before and after it: exactly one more):
  // its events, and events lost in its storm, are ours. Call before drain() reads its events (the
  // loop does: changes and drains happen on its thread).
  void noteOwnCommit(uint32_t generation);

  // Deaf around a big commit of ours (Runner::onBigCommit): while anyone listens, the kernel builds
  // an event for every element and rule the commit adds (nf_tables_commit's notifications), which
  // a cold sync's storm overflows anyway; at 30k services x 10 that was most of the commit's
  // kernel time and grew faster than the state (docs/benchmarks.md, issue 27). Events of the
  // window are missed, as after an overflow: listen() asks the kernel's generation at once, and
  // when every commit in the window was ours (noteOwnCommit) that is the end of it; otherwise the
  // window is damage, found by the next drain() (the next event in the namespace, our next
  // change included) or by the syncer's fingerprint check at the next periodic sync.
  void deafen();
  void listen();

 private:
  bool ours(int family, const std::string& table) const;
  int fd_ = -1;
  std::set<std::pair<Family, std::string>> tables_;
  bool batchTouchesOurs_ = false;  // since the last generation event
  bool deaf_ = false;
  bool missed_ = false;  // deaf for a while: the next drain() checks the generations
  // Every commit up to this generation was seen whole in events (or verified after a loss);
  // nullopt: unknown, so any loss is treated as damage.
  std::optional<uint32_t> accounted_;
  std::set<uint32_t> ownGenerations_;  // above accounted_ (the last kMaxOwn while it is unknown)
  static constexpr size_t kMaxOwn = 1024;
};

// Whether every generation in (accounted, now] is one of `own`: then the events lost in that
// window were all ours.
bool onlyOwnCommitsSince(uint32_t accounted, uint32_t now, const std::set<uint32_t>& own);

}  // namespace kpn::nft
