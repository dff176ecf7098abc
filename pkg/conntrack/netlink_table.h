// The kernel's conntrack table through libnetfilter-conntrack: a filtered dump (the kernel drops
// other families; libnetfilter-conntrack 1.0.9 cannot ask it to drop other protocols, so those
// are dropped here before any copying), streamed to a callback, and deletes sent in batches (one
// sendmsg of many IPCTNL_MSG_CT_DELETE messages built by nfct_nlmsg_build, then their acks) on
// a second socket, so they can go out while the dump is still running.
#pragma once

#include <memory>
#include <string>

#include "pkg/conntrack/reconcile.h"

struct nfct_handle;
struct nlmsghdr;

namespace kpn::conntrack {

class NetlinkFlowTable : public FlowTable {
 public:
  // Opens both sockets in this network namespace; nullptr (and *error) when it cannot (no
  // CAP_NET_ADMIN, no nf_conntrack_netlink).
  static std::unique_ptr<NetlinkFlowTable> open(std::string* error);
  ~NetlinkFlowTable() override;

  bool dump(uint8_t family, const std::function<bool(const Flow&)>& fn, std::string* error) override;
  size_t destroy(const std::vector<Flow>& flows, std::string* error) override;
  // For tests and the bench: create entries (original tuple, reply tuple, timeout) in batches.
  size_t create(const std::vector<std::pair<Flow, Flow>>& origReply, uint32_t timeoutSeconds, std::string* error);

 private:
  NetlinkFlowTable(nfct_handle* dump, int batchFd) : dump_(dump), batchFd_(batchFd) {}
  size_t sendBatch(uint16_t msgType, uint16_t flags, size_t count,
                   const std::function<bool(size_t, ::nlmsghdr*)>& build, std::string* error);
  nfct_handle* dump_;
  int batchFd_;
  uint32_t seq_ = 1;
};

// NetlinkFlowTable::open as a CleanupWorker::TableFactory.
std::unique_ptr<FlowTable> openKernelFlowTable(std::string* error);

}  // namespace kpn::conntrack
