#include "cmd/kube-proxy-nft/status_command.h"

#include <cstring>
#include <iostream>
#include <string>

#include "nft/json_text.h"
#include "pkg/diag/daemon_status.h"
#include "pkg/diag/local_socket.h"
#include "pkg/diag/node_checks.h"
#include "pkg/diag/state_query.h"

namespace kpn::cmd {

namespace {

constexpr const char* kUsage =
    "kube-proxy-nft status [--output=text|json] [--status-socket=@NAME|PATH]: what the running daemon on this node "
    "says about itself (source, syncs, refused services, families, repairs, events) and checks of the node "
    "(forwarding, br_netfilter, conntrack, other proxies' leftovers, forward-hook drop policies); docs/operations.md\n";

constexpr int kAnswerMs = 15000;  // a question waits for the sync loop: a cold sync at 10k services takes seconds

}  // namespace

std::optional<int> runStatusIfAsked(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "status") != 0) return std::nullopt;
  bool json = false;
  std::string socket = diag::kDefaultSocket;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--output=json") json = true;
    else if (a == "--output=text") json = false;
    else if (a.rfind("--status-socket=", 0) == 0) socket = a.substr(16);
    else {
      std::cerr << "status: unknown argument " << a.substr(0, a.find('=')) << " (--output=text|json, --status-socket=)\n";
      return 2;
    }
  }
  std::string error;
  std::optional<diag::DaemonStatus> status;
  if (auto answer = diag::askLocalSocket(socket, diag::queryLine({}), kAnswerMs, &error))
    status = diag::parseStatus(*answer, &error);
  auto checks = diag::runNodeChecks(diag::localNodeFacts());
  if (json) {
    std::cout << "{\"daemon\":" << (status ? diag::statusJson(*status) : std::string("null"))
              << ",\"daemonError\":" << (status ? std::string("null") : nft::jsonString(error))
              << ",\"node\":" << diag::nodeChecksJson(checks) << "}\n";
  } else {
    std::cout << (status ? diag::statusText(*status) : "daemon: no answer: " + error + "\n") << diag::nodeChecksText(checks);
  }
  return status ? 0 : 1;
}

}  // namespace kpn::cmd
