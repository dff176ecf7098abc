#include "cmd/kube-proxy-nft/flags.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "pkg/config/encode.h"
#include "pkg/config/usage.h"
#include "pkg/config/version.h"
#include "pkg/config/warnings.h"
#include "pkg/logging/glog_setup.h"

namespace kpn::cmd {

namespace {

bool readWholeFile(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = std::string("cannot read: ") + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = std::string("cannot read: ") + std::strerror(errno);
    return false;
  }
  *text = ss.str();
  return true;
}

[[noreturn]] void badCommandLine(const std::string& line) {
  std::cerr << line << "\n";
  std::exit(2);
}

// --help and --version, answered before anything is loaded (upstream answers them first too).
void answerCommandFlags(const config::GivenFlags& given) {
  auto help = given.find("help");
  if (help != given.end() && help->second != "false") {
    std::cout << config::usageText();
    std::exit(0);
  }
  auto version = given.find("version");
  if (version == given.end()) return;
  config::VersionAnswer a = config::answerVersionFlag(version->second);
  if (a.error) badCommandLine(*a.error);
  if (a.print) {
    std::cout << *a.print;
    std::exit(0);
  }
}

}  // namespace

config::Loaded loadConfigOrExit(const std::vector<std::string>& args) {
  config::GivenFlags given;
  if (auto err = config::parseArgs(args, given)) badCommandLine(*err);
  answerCommandFlags(given);
  config::Loaded loaded;
  if (auto err = config::loadCommandLine(given, readWholeFile, loaded)) badCommandLine(*err);
  std::vector<std::string> logNotes;
  logging::applyLogging(logging::outputOf(loaded.config.logging, loaded.options.klog, &logNotes), loaded.config.logging);
  if (!loaded.options.writeConfigTo.empty()) {
    std::ofstream out(loaded.options.writeConfigTo, std::ios::trunc);
    out << config::encodeProxyConfig(loaded.config);
    out.close();
    if (!out) {
      std::cerr << "--write-config-to=" << loaded.options.writeConfigTo << ": cannot write: " << std::strerror(errno) << "\n";
      std::exit(1);
    }
    LOG(INFO) << "wrote the configuration to " << loaded.options.writeConfigTo;
    std::exit(0);
  }
  for (const std::string& n : logNotes) LOG(WARNING) << n;
  if (!loaded.ignoredFlags.empty()) {
    std::string names;
    for (const std::string& f : loaded.ignoredFlags) names += (names.empty() ? "" : ", ") + f;
    LOG(WARNING) << "ignored because --config is given (upstream's rule; set the fields in the file): " << names;
  }
  for (const std::string& w : loaded.warnings) LOG(WARNING) << w;
  config::StartupNotes notes = config::startupNotes(loaded.config, !loaded.options.configFile.empty());
  for (const std::string& w : notes.warnings) LOG(WARNING) << w;
  for (const std::string& i : notes.info) LOG(INFO) << i;
  return loaded;
}

}  // namespace kpn::cmd
