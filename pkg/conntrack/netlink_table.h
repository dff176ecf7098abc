// The kernel's conntrack table over ctnetlink, its messages built and parsed by
// libnetfilter-conntrack (nfct_nlmsg_build, nfct_nlmsg_parse). The dump is filtered in the kernel
// by family and by protocol (CTA_FILTER with CTA_PROTO_NUM, Linux 5.8+; libnetfilter-conntrack
// 1.0.9 has no API for the protocol filter, so the request adds those two attributes itself; a
// kernel that refuses them gets a family-only dump, and other protocols are dropped here) and
// streamed to a callback message by message. Deletes go in batches (one sendmsg of many
// IPCTNL_MSG_CT_DELETE messages, then their acks) on a second socket, so they can go out while
// the dump is still running.
#pragma once

#include <memory>
#include <string>

#include "pkg/conntrack/reconcile.h"

struct nlmsghdr;
struct nf_conntrack;

namespace kpn::conntrack {

// One parsed entry (nfct_nlmsg_parse) as a Flow, or false for one that is not a `proto` entry of
// IPv4 or IPv6. clearOptionalAttrs before parsing the next message into the same object: parsing
// only sets what a message has.
bool toFlow(const nf_conntrack* ct, uint8_t proto, Flow* out);
void clearOptionalAttrs(nf_conntrack* ct);

class NetlinkFlowTable : public FlowTable {
 public:
  // Opens both sockets in this network namespace; nullptr (and *error) when it cannot (no
  // CAP_NET_ADMIN).
  static std::unique_ptr<NetlinkFlowTable> open(std::string* error);
  ~NetlinkFlowTable() override;

  bool dump(uint8_t family, uint8_t proto, const std::function<bool(const Flow&)>& fn, std::string* error) override;
  size_t destroy(const std::vector<Flow>& flows, std::string* error) override;
  // For tests and the bench: create entries (original tuple, reply tuple, timeout) in batches.
  size_t create(const std::vector<std::pair<Flow, Flow>>& origReply, uint32_t timeoutSeconds, std::string* error);

  // Entries the kernel sent in dumps so far, of any protocol (the bench checks the filter).
  size_t received() const { return received_; }

 private:
  NetlinkFlowTable(int dumpFd, int batchFd) : dumpFd_(dumpFd), batchFd_(batchFd) {}
  bool dumpOnce(uint8_t family, uint8_t proto, bool protoFilter, const std::function<bool(const Flow&)>& fn,
                std::string* error, bool* refused);
  size_t sendBatch(uint16_t msgType, uint16_t flags, size_t count,
                   const std::function<bool(size_t, ::nlmsghdr*)>& build, std::string* error);
  int dumpFd_, batchFd_;
  uint32_t seq_ = 1;
  bool kernelProtoFilter_ = true;  // until a kernel refuses it
  size_t received_ = 0;
};

// NetlinkFlowTable::open as a CleanupWorker::TableFactory.
std::unique_ptr<FlowTable> openKernelFlowTable(std::string* error);

}  // namespace kpn::conntrack
