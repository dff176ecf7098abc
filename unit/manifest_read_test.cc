// Reading and parsing a manifest folder's files on threads of their own: the results, their order
// and the thread that sees them are those of reading the files one by one.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pkg/source/manifest_read.h"

namespace kpn::source {
namespace {

namespace fs = std::filesystem;
using Outcome = ManifestFile::Outcome;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kpn-manifest-read-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream f(path + "/" + name, std::ios::trunc | std::ios::binary);
    f << text;
    REQUIRE(f.good());
  }
};

std::string serviceJson(const std::string& name, int i) {
  return R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")" + name +
         R"("},"spec":{"clusterIP":"10.0.)" + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) +
         R"(","ports":[{"port":80}]}})";
}

// A List of `n` Services: files of different sizes, so that the threads finish out of order.
std::string listJson(const std::string& prefix, int n) {
  std::string s = R"({"apiVersion":"v1","kind":"List","items":[)";
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + serviceJson(prefix + std::to_string(i), i);
  return s + "]}";
}

// What one file decoded to, as text: its outcome, its services and its error lines.
std::string summary(ManifestFile& f) {
  std::string s = f.name + " " + std::to_string(static_cast<int>(f.outcome)) + " " + f.syntaxError;
  api::DecodedObjects objs;
  api::decodeParsedManifest(f.parsed, objs);
  for (const auto& svc : objs.services) s += " " + svc.meta.name + "=" + svc.clusterIPs.at(0);
  for (const auto& e : objs.errors) s += " [" + e + "]";
  return s;
}

// A folder of several files: big and small, JSON and YAML, one malformed, one with an invalid
// object, one empty, one named but gone, one a FIFO.
struct Folder {
  TempDir d;
  std::vector<std::string> names;
  Folder() {
    for (int i = 0; i < 12; ++i) {
      std::string name = "f" + std::to_string(10 + i) + ".json";
      d.write(name, listJson("s" + std::to_string(i) + "-", i % 3 == 0 ? 3000 : 5));
      names.push_back(name);
    }
    d.write("f12.json", R"({"apiVersion":"v1","kind":"List","items":[)" + serviceJson("cut", 1));  // malformed
    d.write("f14.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: y}\nspec: {clusterIP: 10.9.0.1}\n");
    d.write("f16.json", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"clusterIP":"10.0.0.300"}})");
    d.write("f18.json", "");
    REQUIRE(mkfifo((d.path + "/pipe.json").c_str(), 0600) == 0);
    names.push_back("f14.yaml");
    names.push_back("gone.json");
    names.push_back("pipe.json");
  }
  std::vector<std::string> read(unsigned threads) const {
    std::vector<std::string> out;
    const auto caller = std::this_thread::get_id();
    readManifestFiles(d.path, names, threads, [&](ManifestFile& f) {
      CHECK(std::this_thread::get_id() == caller);
      out.push_back(summary(f));
    });
    return out;
  }
};

TEST_CASE("files read on threads come out as read one by one: same results, in the order asked, on the caller") {
  Folder folder;
  std::vector<std::string> oneByOne;
  for (const auto& name : folder.names) {
    ManifestFile f = readManifestFile(folder.d.path, name);
    oneByOne.push_back(summary(f));
  }
  REQUIRE(oneByOne.size() == folder.names.size());
  auto of = [&](const std::string& name) {
    for (const auto& line : oneByOne)
      if (line.compare(0, name.size() + 1, name + " ") == 0) return line;
    return std::string("missing");
  };
  const std::string parsed = std::to_string(static_cast<int>(Outcome::kParsed));
  const std::string gone = std::to_string(static_cast<int>(Outcome::kGone));
  CHECK(of("f10.json").find(" s0-2999=10.0.11.250") != std::string::npos);  // a whole big file
  CHECK(of("f12.json").find(std::to_string(static_cast<int>(Outcome::kSyntaxError)) + " JSON: ") !=
        std::string::npos);  // malformed
  CHECK(of("f16.json").find("10.0.0.300") != std::string::npos);  // an invalid object's error
  CHECK(of("f18.json") == "f18.json " + parsed + " ");              // empty: no objects
  CHECK(of("f14.yaml").find(" y=10.9.0.1") != std::string::npos);   // YAML
  CHECK(of("gone.json") == "gone.json " + gone + " ");
  CHECK(of("pipe.json") == "pipe.json " + gone + " ");  // a FIFO is no regular file
  for (unsigned threads : {0u, 1u, 2u, 3u, 8u}) {
    CAPTURE(threads);
    for (int run = 0; run < 3; ++run) CHECK(folder.read(threads) == oneByOne);
  }
}

TEST_CASE("a consumer that throws stops the read without leaving threads behind") {
  Folder folder;
  int seen = 0;
  CHECK_THROWS_AS(readManifestFiles(folder.d.path, folder.names, 2,
                                    [&](ManifestFile&) {
                                      if (++seen == 2) throw std::runtime_error("merge failed");
                                    }),
                  std::runtime_error);
  CHECK(seen == 2);
}

TEST_CASE("a buffer reused for a smaller file holds only that file") {
  TempDir d;
  d.write("big.json", listJson("big-", 2000));
  d.write("small.json", serviceJson("small", 7));
  ManifestFile f = readManifestFile(d.path, "big.json");
  REQUIRE(f.outcome == Outcome::kParsed);
  f.parsed.clear();
  f = readManifestFile(d.path, "small.json", std::move(f));
  CHECK(summary(f) == "small.json 0  small=10.0.0.8");
}

}  // namespace
}  // namespace kpn::source
