// One `trace` run's tables and state: the table packets run through (this node's live table, or
// the one a source flag's state renders), the cluster state that explains the verdicts (the
// running daemon's, asked over its status socket, or the source flag's), and, for the live table,
// the state's own rendering of it, to tell drift. Each packet becomes a report with its cause.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nft/eval/eval_table.h"
#include "nft/eval/trace_report.h"
#include "nft/listing.h"
#include "pkg/net/ip.h"
#include "pkg/services/environment.h"
#include "pkg/trace/frontends.h"
#include "pkg/trace/known_state.h"
#include "pkg/trace/node_view.h"
#include "pkg/trace/request.h"

namespace kpn::cmd {

class TraceSession {
 public:
  // `rendered`: trace through the state's rendering (a source flag); else through the live table.
  TraceSession(bool rendered, std::optional<trace::KnownState> known, nft::eval::StateInfo info);

  const trace::KnownState* known() const { return known_ ? &*known_ : nullptr; }
  const nft::eval::StateInfo& info() const { return info_; }
  // Where NodePorts answer on this node, for a family (the state's rendering environment).
  std::vector<std::string> nodePortAddresses(nft::Family f);

  // One packet: its report, with the cause and the frontend it traced. nullopt and *error when
  // the table cannot be read.
  std::optional<nft::eval::Report> trace(const trace::Request& req, nft::eval::Packet packet,
                                         const std::optional<trace::ServiceFrontend>& frontend,
                                         const api::Service* service, bool excluded, std::string* error);
  // The packet of `req` toward one address: the source of its family (or the kernel's choice
  // from the node), the interface it arrives on.
  std::optional<nft::eval::Packet> packetToward(const trace::Request& req, const trace::ServiceFrontend& f,
                                                std::string* skipped);

 private:
  const nft::ListedTable* live(nft::Family f, std::string* error);
  const nft::Ruleset* desired();

  const bool rendered_;
  std::optional<trace::KnownState> known_;
  nft::eval::StateInfo info_;
  net::HostAddresses host_;
  std::vector<nft::eval::Route> routes_;
  std::map<nft::Family, nft::ListedTable> live_;
  std::optional<nft::Ruleset> desired_;
  std::optional<services::Environment> env_;
};

}  // namespace kpn::cmd
