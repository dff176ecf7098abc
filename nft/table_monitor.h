// Listens to the kernel's nftables change events (NFNLGRP_NFTABLES on a plain netlink socket)
// and says when someone else changed one of our tables: `nft flush ruleset`, a reload of the
// distribution's nftables service, an operator's edit. Our own commits are recognised by the
// thread that made them (the generation event names it) and ignored. Kubernetes-free; the loop
// polls fd() and asks drain() when it is readable.
#pragma once

#include <memory>
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
  // tables (or events were lost, so that it may have).
  bool drain();

 private:
  bool ours(int family, const std::string& table) const;
  int fd_ = -1;
  std::set<std::pair<Family, std::string>> tables_;
  bool batchTouchesOurs_ = false;  // since the last generation event
};

}  // namespace kpn::nft
