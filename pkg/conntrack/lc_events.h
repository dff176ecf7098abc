// The kernel side of least connection's counts: ctnetlink's events for new, changed and destroyed
// conntrack entries (the NEW, UPDATE and DESTROY groups) on one socket, with a socket filter the
// kernel runs on every event (libnetfilter-conntrack's nfct_filter, a classic BPF program: the
// protocols of the least-connection ports and original destinations that cover their frontend
// addresses), so that other traffic's events never reach this process. The filter holds at most
// 127 IPv4 and 20 IPv6 address/mask pairs: more frontends are covered by shorter prefixes (the
// counter drops what is not a frontend). A family with a least-connection NodePort is filtered
// by protocol only: any of the node's addresses can be its destination.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pkg/conntrack/flow.h"

struct nf_conntrack;

namespace kpn::conntrack {

struct Prefix {
  Ip ip;      // masked
  int bits = 0;
  bool operator==(const Prefix& o) const { return bits == o.bits && ip == o.ip; }
};

// The fewest-bits-lost prefixes of one length that cover `addresses` (4 or 16 bytes used by
// `family`), at most `limit` of them: the longest length at which the addresses fall into that
// many prefixes or fewer.
std::vector<Prefix> coverPrefixes(std::vector<Ip> addresses, uint8_t family, size_t limit);

// What the kernel lets through, per family: nothing (no port of it), everything of the protocols
// (a NodePort), or the protocols to the covering prefixes.
struct EventFilter {
  std::vector<uint8_t> protocols;  // IPPROTO_*, of both families
  bool v4 = false, v6 = false;     // the family has ports at all
  bool allV4 = false, allV6 = false;
  std::vector<Prefix> prefixesV4, prefixesV6;
  bool operator==(const EventFilter& o) const {
    return protocols == o.protocols && v4 == o.v4 && v6 == o.v6 && allV4 == o.allV4 && allV6 == o.allV6 &&
           prefixesV4 == o.prefixesV4 && prefixesV6 == o.prefixesV6;
  }
};

class ConntrackEvents {
 public:
  // nullptr (and *error) without CAP_NET_ADMIN or ctnetlink.
  static std::unique_ptr<ConntrackEvents> open(std::string* error);
  ~ConntrackEvents();
  int fd() const { return fd_; }
  bool setFilter(const EventFilter& filter, std::string* error);

  enum class Kind { Update, Destroy };  // Update: a new entry or a change of one
  // Reads every event queued now (the socket does not block). False when the kernel dropped
  // events because the socket's buffer was full (ENOBUFS): the counts need a dump.
  bool drain(const std::function<void(Kind, const Flow&)>& fn, std::string* error);
  uint64_t received() const { return received_; }

 private:
  explicit ConntrackEvents(int fd);
  int fd_;
  uint64_t received_ = 0;
  // Kept across drains: a fresh 256 KiB buffer per wake-up was most of the cost of an event.
  std::vector<char> buffer_;
  std::unique_ptr<nf_conntrack, void (*)(nf_conntrack*)> parsed_;
};

}  // namespace kpn::conntrack
