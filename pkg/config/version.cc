#include "pkg/config/version.h"

#include "pkg/config/flag_values.h"

#ifndef KPN_VERSION
#define KPN_VERSION "unknown"
#endif
#ifndef KPN_GIT_COMMIT
#define KPN_GIT_COMMIT "unknown"
#endif

namespace kpn::config {

namespace {

std::string& reportedVersion() {
  static std::string v = KPN_VERSION;
  return v;
}

const char* platform() {
#if defined(__x86_64__)
  return "linux/amd64";
#elif defined(__aarch64__)
  return "linux/arm64";
#else
  return "linux/unknown";
#endif
}

// Go's %#v of upstream's version.Info, with the fields this build has.
std::string rawVersion() {
  std::string v = version(), major = v.substr(0, v.find('.')), minor;
  if (v.find('.') != std::string::npos) {
    minor = v.substr(v.find('.') + 1);
    minor = minor.substr(0, minor.find('.'));
  }
  return "version.Info{Major:\"" + major + "\", Minor:\"" + minor + "\", GitVersion:\"v" + v + "\", GitCommit:\"" +
         gitCommit() + "\", Compiler:\"gcc " + __VERSION__ + "\", Platform:\"" + platform() + "\"}";
}

}  // namespace

std::string version() { return reportedVersion(); }
std::string gitCommit() { return KPN_GIT_COMMIT; }
std::string versionLine() { return version() + " (commit " + gitCommit() + ")"; }

VersionAnswer answerVersionFlag(const std::string& value) {
  if (value == "raw") return {rawVersion() + "\n", std::nullopt};
  if (!value.empty() && value[0] == 'v') {
    reportedVersion() = value.substr(1);
    return {};
  }
  try {
    if (flagBool("version", value)) return {"kube-proxy-nft version " + versionLine() + "\n", std::nullopt};
    return {};
  } catch (const FlagError&) {
    return {std::nullopt, "invalid value \"" + value + "\" for --version: want true, false, raw or vX.Y.Z"};
  }
}

}  // namespace kpn::config
