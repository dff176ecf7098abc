// For bench/libnftables_cache_cost.py only: the daemon's libnftnl interposers (nft/kernel/cache_scope,
// nft/kernel/typeof_guard) as an LD_PRELOAD library, so that their effect on libnftables can be measured
// outside the daemon. With KPN_SCOPE set, the cache scope is ip/ip6 kube-proxy, as in the helper.
#include <linux/netfilter.h>

#include <cstdlib>

#include "nft/kernel/cache_scope.h"

__attribute__((constructor)) static void scopeFromEnvironment() {
  if (std::getenv("KPN_SCOPE")) kpn::nft::setCacheScope({{NFPROTO_IPV4, "kube-proxy"}, {NFPROTO_IPV6, "kube-proxy"}});
}
