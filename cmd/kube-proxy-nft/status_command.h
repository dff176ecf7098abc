// `kube-proxy-nft status`: what the running daemon says about itself (over its status socket) and
// the node checks (docs/operations.md, "Status").
#pragma once

#include <optional>

namespace kpn::cmd {

// nullopt when argv is not `status ...`; else the exit code: 0 the daemon answered, 1 it did not
// (the node checks are printed either way), 2 a bad argument.
std::optional<int> runStatusIfAsked(int argc, char** argv);

}  // namespace kpn::cmd
