#include "cmd/kube-proxy-nft/nft_runner_options.h"

#include <string>

#include "pkg/render/layout.h"

namespace kpn::cmd {

nft::NftRunnerOptions nftRunnerOptions() {
  nft::NftRunnerOptions options;
  options.tables = {{nft::Family::IPv4, render::kTableName}, {nft::Family::IPv6, render::kTableName}};
  options.probeTable = std::string(render::kTableName) + "-probe";
  return options;
}

}  // namespace kpn::cmd
