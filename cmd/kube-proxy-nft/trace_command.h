// `kube-proxy-nft trace ...`: one packet's path through this node's live table (or through the
// ruleset a source flag renders), docs/trace.md. The logic is in nft/eval/trace_report and pkg/trace;
// this wires flags, the table source and the output.
#pragma once

#include <optional>

namespace kpn::cmd {

// When argv[1] is "trace": runs it and returns the exit status (0 traced, 1 could not read the
// tables or model them, 2 bad arguments); nullopt otherwise.
std::optional<int> runTraceIfAsked(int argc, char** argv);

}  // namespace kpn::cmd
