// The version of this build and the git commit it was built from (the Makefile passes both with
// -D; "unknown" outside a git checkout). --version prints them; i10's build_info gauge labels.
#pragma once

#include <optional>
#include <string>

namespace kpn::config {

std::string version();  // the build's, or what --version=vX.Y.Z set
std::string gitCommit();
// "0.1.0 (commit 0123abcd4567)": what --version prints after the program name.
std::string versionLine();

// --version's value, as upstream's verflag reads it: true (or 1, t, ...) prints the version line,
// raw prints every field, false runs, vX.Y.Z sets the version reported and runs.
struct VersionAnswer {
  std::optional<std::string> print;  // print this and exit 0
  std::optional<std::string> error;  // not a value --version takes: exit 2
};
VersionAnswer answerVersionFlag(const std::string& value);

}  // namespace kpn::config
