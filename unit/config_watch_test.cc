// The --config watch: a write or a rename of the file is reported once.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>

#include "pkg/config/file_watch.h"

using kpn::config::ConfigFileWatch;

namespace {

std::string tempFile() {
  char tmpl[] = "/tmp/kpn-config-watch-XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  close(fd);
  return tmpl;
}

}  // namespace

TEST_CASE("config watch: a write to the file is reported, once") {
  std::string path = tempFile();
  std::promise<std::string> seen;
  int calls = 0;
  {
    ConfigFileWatch w(path, [&](const std::string& what) {
      ++calls;
      seen.set_value(what);
    });
    std::ofstream(path, std::ios::app) << "# edited\n";
    auto f = seen.get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK(f.get() == "written");
    std::ofstream(path, std::ios::app) << "# again\n";
  }  // joined: the thread ended after its first report
  CHECK(calls == 1);
  std::remove(path.c_str());
}

TEST_CASE("config watch: a rename of the file is reported") {
  std::string path = tempFile();
  std::promise<std::string> seen;
  ConfigFileWatch w(path, [&](const std::string& what) { seen.set_value(what); });
  REQUIRE(std::rename(path.c_str(), (path + ".moved").c_str()) == 0);
  auto f = seen.get_future();
  REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(f.get() == "renamed");
  std::remove((path + ".moved").c_str());
}

TEST_CASE("config watch: no file, no watch; a missing file is not fatal") {
  int calls = 0;
  { ConfigFileWatch none("", [&](const std::string&) { ++calls; }); }
  { ConfigFileWatch missing("/nonexistent/kpn.conf", [&](const std::string&) { ++calls; }); }
  CHECK(calls == 0);
}
