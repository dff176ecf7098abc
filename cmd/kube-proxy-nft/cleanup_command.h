// --cleanup, as upstream's: delete our tables (ip and ip6 kube-proxy) and upstream kube-proxy's
// iptables-mode chains, saying what was removed.
#pragma once

namespace kpn::cmd {

// 0, or 1 when something could not be removed (each failure logged).
int runCleanup();

}  // namespace kpn::cmd
