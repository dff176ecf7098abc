// The version of this build and the git commit it was built from (the Makefile passes both with
// -D; "unknown" outside a git checkout). --version prints them; i10's build_info gauge labels.
#pragma once

#include <string>

namespace kpn::config {

std::string version();
std::string gitCommit();
// "0.1.0 (commit 0123abcd4567)": what --version prints after the program name.
std::string versionLine();

}  // namespace kpn::config
