// kubeconfig and in-cluster configuration, backoff, the client rate limit and token re-reading.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "pkg/kube/backoff.h"
#include "pkg/kube/client_config.h"
#include "pkg/kube/rate_limiter.h"
#include "pkg/kube/token_source.h"

namespace kpn::kube {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kpn-unit-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
};

// base64 of "CA-PEM", "CERT-PEM", "KEY-PEM"
const char* kCaB64 = "Q0EtUEVN";
const char* kCertB64 = "Q0VSVC1QRU0=";
const char* kKeyB64 = "S0VZLVBFTQ==";

TEST_CASE("kubeconfig: current-context picks cluster and user; relative files resolve against its folder") {
  TempDir d;
  d.write("ca.crt", "CA FILE");
  d.write("client.crt", "CERT FILE");
  d.write("client.key", "KEY FILE");
  std::string path = d.write("config", R"(apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: other
  context: {cluster: nowhere, user: nobody}
- name: prod
  context:
    cluster: c1
    user: u1
    namespace: kube-system
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: ca.crt
    tls-server-name: kubernetes.default.svc
users:
- name: u1
  user:
    client-certificate: client.crt
    client-key: client.key
)");
  ClientConfig c;
  c.qps = 50;
  REQUIRE_FALSE(loadKubeconfig(path, "", c));
  CHECK(c.server == "https://10.0.0.1:6443");
  CHECK(c.caPem == "CA FILE");
  CHECK(c.caSource == "file " + d.path + "/ca.crt");
  CHECK(c.tlsServerName == "kubernetes.default.svc");
  CHECK(c.clientCertPem == "CERT FILE");
  CHECK(c.clientKeyPem == "KEY FILE");
  CHECK(c.token.empty());
  CHECK_FALSE(c.insecureSkipTlsVerify);
  CHECK(c.qps == 50);  // flags the caller set survive
}

TEST_CASE("kubeconfig: -data fields, token, tokenFile, insecure, explicit context, IPv6 server") {
  TempDir d;
  d.write("tok", "secret-from-file\n");
  std::string text = std::string(R"(current-context: a
contexts:
- {name: a, context: {cluster: c, user: u}}
- {name: b, context: {cluster: c6, user: t}}
clusters:
- {name: c, cluster: {server: "https://api.example:443", certificate-authority-data: )") + kCaB64 + R"(}}
- {name: c6, cluster: {server: "https://[fd00::1]:6443", insecure-skip-tls-verify: true}}
users:
- {name: u, user: {client-certificate-data: )" + kCertB64 + ", client-key-data: " + kKeyB64 + R"(, token: abc}}
- {name: t, user: {tokenFile: tok}}
)";
  ClientConfig a;
  REQUIRE_FALSE(parseKubeconfig(text, d.path, "", a));
  CHECK(a.server == "https://api.example:443");
  CHECK(a.caPem == "CA-PEM");
  CHECK(a.caSource == "kubeconfig certificate-authority-data");
  CHECK(a.clientCertPem == "CERT-PEM");
  CHECK(a.clientKeyPem == "KEY-PEM");
  CHECK(a.token == "abc");
  ClientConfig b;
  REQUIRE_FALSE(parseKubeconfig(text, d.path, "b", b));
  CHECK(b.server == "https://[fd00::1]:6443");
  CHECK(b.insecureSkipTlsVerify);
  CHECK(b.tokenFile == d.path + "/tok");
  CHECK(b.caPem.empty());
}

TEST_CASE("kubeconfig: errors name the problem") {
  TempDir d;
  auto err = [&](const std::string& text) {
    ClientConfig c;
    auto e = parseKubeconfig(text, d.path, "", c);
    REQUIRE(e);
    return *e;
  };
  CHECK(err("- a\n- b\n").find("not a kubeconfig") != std::string::npos);
  CHECK(err("clusters: []\n").find("current-context") != std::string::npos);
  CHECK(err("current-context: x\ncontexts: []\n").find("no entry named \"x\"") != std::string::npos);
  const std::string head = "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n";
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'ftp://x'}}]\nusers: [{name: u, user: {}}]\n")
            .find("scheme") != std::string::npos);
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority: missing.crt}}]\n"
                   "users: [{name: u, user: {}}]\n")
            .find("missing.crt") != std::string::npos);
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority-data: '!!!'}}]\n"
                   "users: [{name: u, user: {}}]\n")
            .find("base64") != std::string::npos);
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
                   "users: [{name: u, user: {exec: {command: aws}}}]\n")
            .find("exec credential plugins are not supported") != std::string::npos);
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
                   "users: [{name: u, user: {auth-provider: {name: oidc}}}]\n")
            .find("auth-provider") != std::string::npos);
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
                   "users: [{name: u, user: {client-certificate-data: " + kCertB64 + "}}]\n")
            .find("together") != std::string::npos);
  CHECK(err(head + "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
                   "users: [{name: u, user: {tokenFile: nope}}]\n")
            .find("tokenFile") != std::string::npos);
  ClientConfig c;
  CHECK(loadKubeconfig(d.path + "/absent", "", c)->find("cannot read") != std::string::npos);
}

// yaml-cpp reads a NUL byte as a backslash and decodes "\_" to the lone byte 0xA0: a token read
// that way is not the token in the file. kubectl's decoder (go-yaml) refuses both; so do we.
TEST_CASE("kubeconfig: control characters and escapes yaml-cpp mis-decodes are refused, with where") {
  TempDir d;
  const std::string head = "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://x'}}]\n";
  ClientConfig good;
  REQUIRE_FALSE(parseKubeconfig(head + "users: [{name: u, user: {token: \"abc\\u00e9\"}}]\n", d.path, "", good));
  CHECK(good.token == "abc\xc3\xa9");
  for (const std::string& user : {std::string("users: [{name: u, user: {token: \"abc\\_def\"}}]\n"),
                                  std::string("users: [{name: u, user: {token: \"abc\\Ndef\"}}]\n"),
                                  std::string("users: [{name: u, user: {token: abc") + '\0' + "_def}}]\n",
                                  std::string("users: [{name: u, user: {token: abc\x1b" "def}}]\n")}) {
    CAPTURE(user);
    ClientConfig c;
    c.token = "before";
    auto e = parseKubeconfig(head + user, d.path, "", c);
    REQUIRE(e);
    INFO(*e);
    CHECK(e->find("line 4") != std::string::npos);  // the users line
    CHECK(c.token == "before");
  }
}

TEST_CASE("in-cluster: env host and port (IPv6 bracketed), token file and CA from the service-account folder") {
  TempDir d;
  d.write("token", "sa-token");
  d.write("ca.crt", "SA CA");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "fd00:10:96::1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  ClientConfig c;
  REQUIRE_FALSE(inClusterConfig(getenv, d.path, c));
  CHECK(c.server == "https://[fd00:10:96::1]:443");
  CHECK(c.tokenFile == d.path + "/token");
  CHECK(c.caPem == "SA CA");
  env.erase("KUBERNETES_SERVICE_PORT");
  ClientConfig c2;
  CHECK(inClusterConfig(getenv, d.path, c2)->find("KUBERNETES_SERVICE_PORT") != std::string::npos);
  env["KUBERNETES_SERVICE_PORT"] = "443";
  CHECK(inClusterConfig(getenv, d.path + "/nope", c2)->find("token") != std::string::npos);
}

TEST_CASE("server URLs are checked and normalised") {
  std::string s;
  CHECK_FALSE(normaliseServer("10.0.0.1:6443", s));
  CHECK(s == "https://10.0.0.1:6443");
  CHECK_FALSE(normaliseServer("http://127.0.0.1:8080/", s));
  CHECK(s == "http://127.0.0.1:8080");
  CHECK_FALSE(normaliseServer("https://rancher.example/k8s/clusters/c-1/", s));
  CHECK(s == "https://rancher.example/k8s/clusters/c-1");
  CHECK(normaliseServer("https://x/?a=b", s));
  CHECK(normaliseServer("https://user@x", s));
  CHECK(normaliseServer("https:///path", s));
  CHECK(joinHostPort("https", "10.0.0.1", "443") == "https://10.0.0.1:443");
  CHECK(joinHostPort("https", "::1", "443") == "https://[::1]:443");
}

TEST_CASE("backoff doubles up to the ceiling, with bounded jitter, and resets") {
  using ms = std::chrono::milliseconds;
  Backoff b(ms(500), ms(4000), 0.5, 42);
  std::vector<int64_t> seen;
  for (int i = 0; i < 6; i++) seen.push_back(b.next().count());
  int64_t bases[] = {500, 1000, 2000, 4000, 4000, 4000};
  for (int i = 0; i < 6; i++) {
    CHECK(seen[i] >= bases[i]);
    CHECK(seen[i] <= bases[i] * 3 / 2);
  }
  b.reset();
  CHECK(b.next().count() <= 750);
  Backoff noJitter(ms(100), ms(1000), 0.0, 1);
  CHECK(noJitter.next() == ms(100));
  CHECK(noJitter.next() == ms(200));
}

TEST_CASE("rate limiter: burst at once, then qps") {
  RateLimiter rl(10, 3);
  auto now = RateLimiter::Clock::now();
  for (int i = 0; i < 3; i++) REQUIRE(rl.acquire());
  auto wait = rl.waitTime(RateLimiter::Clock::now());
  CHECK(wait > std::chrono::milliseconds(50));
  CHECK(wait <= std::chrono::milliseconds(100));
  CHECK(rl.waitTime(now + std::chrono::seconds(1)) == RateLimiter::Clock::duration::zero());
  RateLimiter unlimited(0, 1);
  for (int i = 0; i < 100; i++) REQUIRE(unlimited.acquire());
  RateLimiter stopped(0.001, 1);
  REQUIRE(stopped.acquire());
  stopped.stop();
  CHECK_FALSE(stopped.acquire());  // would wait ~17 min; stop() ends the wait
}

TEST_CASE("token source: re-reads the file after the refresh period and after a 401, keeps the old token on a bad read") {
  TempDir d;
  std::string file = d.write("token", "one\n");
  TokenSource ts("", file, std::chrono::seconds(60));
  auto t0 = TokenSource::Clock::now();
  CHECK(ts.token(t0) == "one");
  d.write("token", "two");
  CHECK(ts.token(t0 + std::chrono::seconds(1)) == "one");  // cached
  CHECK(ts.token(t0 + std::chrono::seconds(61)) == "two");  // period passed
  d.write("token", "three");
  ts.invalidate();
  CHECK(ts.token(t0 + std::chrono::seconds(62)) == "three");  // 401: read at once
  unlink(file.c_str());
  ts.invalidate();
  CHECK(ts.token(t0 + std::chrono::seconds(63)) == "three");  // mid-rotation: keep the last good one
  TokenSource fixed("static", "");
  CHECK(fixed.token() == "static");
}

}  // namespace
}  // namespace kpn::kube
