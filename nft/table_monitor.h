// Listens to the kernel's nftables change events (NFNLGRP_NFTABLES on a plain netlink socket)
// and says when someone else changed one of our tables: `nft flush ruleset`, a reload of the
// distribution's nftables service, an operator's edit. Our own commits are recognised by the
// process that made them (the generation event names it: a thread of ours, or our libnftables
// helper process) and ignored. Kubernetes-free; the loop polls fd() and asks drain() when it is
// readable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  // tables (or events were lost, so that it may have).
  bool drain();

 private:
  bool ours(int family, const std::string& table) const;
  bool committedByUs(uint32_t pid) const;
  int fd_ = -1;
  OwnCommitter ownCommitter_;
  std::set<std::pair<Family, std::string>> tables_;
  bool batchTouchesOurs_ = false;  // since the last generation event
};

}  // namespace kpn::nft
