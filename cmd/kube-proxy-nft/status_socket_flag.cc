#include "cmd/kube-proxy-nft/status_socket_flag.h"

#include "pkg/diag/local_socket.h"

DEFINE_string(status_socket, kpn::diag::kDefaultSocket,
              "Where the daemon answers `kube-proxy-nft status` and `trace`: @NAME (abstract, this network namespace; "
              "the default) or a path; only root (or the daemon's user) may ask. Empty: no status socket");
