// Where the cluster state comes from, as the flags name it (shared by the daemon and `trace`).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "pkg/config/command_line.h"
#include "pkg/kube/transport.h"
#include "pkg/source/source.h"
#include "pkg/state/cluster_state.h"

namespace kpn::cmd {

std::string localHostname();

// Picks the source the flags name: a manifest folder, an API server from --kubeconfig/--master,
// or the in-cluster API server. Exits 2 with one line when none applies or the config is bad.
std::unique_ptr<source::Source> makeSource(const config::Loaded& conf, const std::string& nodeName,
                                           state::ClusterState& state, kube::RequestHook onRequest);

// The API source fills the state in the background: waits for the first full list (false after
// `limit`, or when a signal arrives on `sigfd`; -1 for none).
bool waitSynced(source::Source& source, int sigfd, std::chrono::seconds limit);

}  // namespace kpn::cmd
