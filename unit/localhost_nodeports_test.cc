// NodePorts on loopback (issue 29): which listeners a family wants, what the table adds (the
// reject rule, its set and named counters, declared at start-up and found again by a restart),
// and the listeners themselves relaying real connections on 127.0.0.1.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "nft/diff.h"
#include "nft/listing.h"
#include "nft/static_declarations.h"
#include "pkg/localhost/proxy.h"
#include "pkg/render/localhost_nodeports.h"
#include "pkg/render/render.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

bool has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

services::NodeConfig cfgWith(std::vector<std::string> nodePortAddresses) {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  services::applyNodePortAddresses(nodePortAddresses, cfg);
  return cfg;
}

api::ServicePort npPort(const std::string& name, int32_t p, int32_t np, api::Protocol proto = api::Protocol::TCP) {
  auto sp = port(name, p, proto);
  sp.nodePort = np;
  return sp;
}

// web: TCP 30001 + UDP 30053 + SCTP 30090, endpoints on node-a and node-b (both families).
state::ClusterState webState(const std::string& etp = "Cluster") {
  state::ClusterState st;
  auto s = service("ns1", "web", {"10.96.0.1", "fd00::1"},
                   {npPort("http", 80, 30001), npPort("dns", 53, 30053, api::Protocol::UDP),
                    npPort("sig", 9000, 30090, api::Protocol::SCTP)});
  s->type = "NodePort";
  s->externalTrafficPolicy = etp;
  st.upsertService(s);
  std::vector<api::EndpointPort> ports = {epPort("http", 8080), epPort("dns", 53, api::Protocol::UDP),
                                          epPort("sig", 9000, api::Protocol::SCTP)};
  st.upsertSlice(slice("ns1", "web-4", "web", ports, {{"10.1.0.1", true, true, false, "node-a"}, {"10.1.0.2", true, true, false, "node-b"}}));
  st.upsertSlice(slice("ns1", "web-6", "web", ports, {{"fd00:1::1", true, true, false, "node-a"}}, "IPv6"));
  return st;
}

std::string text(const state::ClusterState& st, const services::NodeConfig& cfg) {
  render::Renderer r(cfg);
  return nft::planReconcile({}, r.render(st, nullptr)).txn.toText();
}

// A TCP server on 127.0.0.1 that answers each connection with `tag`, then closes.
struct TagServer {
  int fd = -1;
  uint16_t port = 0;
  std::thread thread;
  explicit TagServer(std::string tag) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t n = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
    listen(fd, 64);
    thread = std::thread([this, tag] {
      for (;;) {
        int c = accept(fd, nullptr, nullptr);
        if (c < 0) return;
        char buf[64];
        ssize_t got = read(c, buf, sizeof buf);  // the client speaks first: relayed both ways
        std::string reply = tag + ":" + std::string(buf, got > 0 ? got : 0);
        (void)!write(c, reply.data(), reply.size());
        close(c);
      }
    });
  }
  ~TagServer() {
    shutdown(fd, SHUT_RDWR);
    close(fd);
    thread.join();
  }
};

// A port on 127.0.0.1 nobody listens on now.
uint16_t freePort() {
  TagServer probe("x");
  return probe.port;
}

// One connection to 127.0.0.1:port: sends "hi", returns what came back ("" on failure).
std::string ask(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    (void)!write(fd, "hi", 2);
    shutdown(fd, SHUT_WR);
    char buf[128];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  }
  close(fd);
  return out;
}

}  // namespace

TEST_CASE("localhost NodePorts: the listeners a family wants, by traffic policy") {
  auto cfg = cfgWith({"primary", "localhost"});
  auto v4 = render::localhostNodePorts(webState(), cfg, net::Family::V4);
  REQUIRE(v4.size() == 1);  // TCP only: UDP and SCTP get no listener
  CHECK(v4.at(30001).service == "ns1/web");
  CHECK(v4.at(30001).endpoints == std::vector<std::pair<std::string, int32_t>>{{"10.1.0.1", 8080}, {"10.1.0.2", 8080}});
  auto v6 = render::localhostNodePorts(webState(), cfg, net::Family::V6);
  CHECK(v6.at(30001).endpoints == std::vector<std::pair<std::string, int32_t>>{{"fd00:1::1", 8080}});

  // eTP=Local: this node's endpoints only; none here: no listener at all.
  auto local = render::localhostNodePorts(webState("Local"), cfg, net::Family::V4);
  CHECK(local.at(30001).endpoints == std::vector<std::pair<std::string, int32_t>>{{"10.1.0.1", 8080}});
  state::ClusterState away = webState("Local");
  away.upsertSlice(slice("ns1", "web-4", "web", {epPort("http", 8080)}, {{"10.1.0.2", true, true, false, "node-b"}}));
  CHECK(render::localhostNodePorts(away, cfg, net::Family::V4).empty());

  // A family without a loopback entry, or no entry at all: nothing.
  CHECK(render::localhostNodePorts(webState(), cfgWith({"127.0.0.1/32"}), net::Family::V6).empty());
  CHECK(render::localhostNodePorts(webState(), cfgWith({}), net::Family::V4).empty());
  CHECK(render::localhostNodePorts(webState(), cfgWith({"all"}), net::Family::V4).empty());

  // Two services with one nodePort: the older keeps it, as in the table.
  state::ClusterState st = webState();
  auto newer = service("ns1", "copy", {"10.96.0.2"}, {npPort("http", 80, 30001)});
  newer->type = "NodePort";
  newer->meta.creationTimestamp = "2030-01-01T00:00:00Z";
  st.upsertService(newer);
  st.upsertSlice(slice("ns1", "copy-1", "copy", {epPort("http", 8080)}, {{"10.1.0.9", true, true, false, "node-a"}}));
  auto web = std::make_shared<api::Service>(*st.services.at("ns1/web"));
  web->meta.creationTimestamp = "2020-01-01T00:00:00Z";
  st.upsertService(web);
  CHECK(render::localhostNodePorts(st, cfg, net::Family::V4).at(30001).service == "ns1/web");
  // ClientIP affinity travels with it.
  web = std::make_shared<api::Service>(*web);
  web->sessionAffinity = "ClientIP";
  web->sessionAffinityTimeoutSeconds = 30;
  st.upsertService(web);
  CHECK(render::localhostNodePorts(st, cfg, net::Family::V4).at(30001).affinitySeconds == 30);
}

TEST_CASE("localhost NodePorts: the table rejects UDP and SCTP on loopback, counted; nothing without the entry") {
  std::string t = text(webState(), cfgWith({"primary", "localhost"}));
  CHECK(has(t, "add set ip kube-proxy localhost-nodeports { type inet_proto . inet_service ; }"));
  CHECK(has(t, "add rule ip kube-proxy filter-input ip daddr == 127.0.0.0/8 meta l4proto . th dport @localhost-nodeports jump localhost-nodeport-reject"));
  CHECK(has(t, "add rule ip6 kube-proxy filter-input ip6 daddr == ::1 meta l4proto . th dport @localhost-nodeports jump localhost-nodeport-reject"));
  CHECK(has(t, "add rule ip kube-proxy localhost-nodeport-reject meta l4proto == udp counter name \"localhost-nodeport-rejected-udp\" reject"));
  CHECK(has(t, "add rule ip6 kube-proxy localhost-nodeport-reject meta l4proto == sctp counter name \"localhost-nodeport-rejected-sctp\" reject"));
  CHECK(has(t, "add element ip kube-proxy localhost-nodeports { udp . 30053 comment \"ns1/web:dns\" }"));
  CHECK(has(t, "add element ip kube-proxy localhost-nodeports { sctp . 30090 comment \"ns1/web:sig\" }"));
  CHECK_FALSE(has(t, "localhost-nodeports { tcp"));
  // IPv4 only: the IPv6 table has none of it.
  t = text(webState(), cfgWith({"primary", "127.0.0.1/32"}));
  CHECK(has(t, "add rule ip kube-proxy filter-input ip daddr == 127.0.0.0/8"));
  CHECK_FALSE(has(t, "ip6 kube-proxy localhost-nodeport"));
  for (auto entries : {std::vector<std::string>{}, {"all"}, {"0.0.0.0/0", "::/0"}})
    CHECK_FALSE(has(text(webState(), cfgWith(entries)), "localhost-nodeport"));
}

TEST_CASE("localhost NodePorts: the counters are start-up declarations, and a restart finds them") {
  render::Renderer r(cfgWith({"localhost"}));
  nft::Ruleset skeleton = r.skeleton();
  std::string decl = nft::staticDeclarationsText(skeleton);
  CHECK(has(decl, "add counter ip kube-proxy localhost-nodeport-rejected-udp\n"));
  CHECK(has(decl, "add counter ip6 kube-proxy localhost-nodeport-rejected-sctp\n"));
  CHECK(skeleton.tables[0].counters == std::vector<std::string>{"localhost-nodeport-rejected-udp", "localhost-nodeport-rejected-sctp"});
  CHECK(render::Renderer(cfgWith({"primary"})).skeleton().tables[0].counters.empty());

  // What nft 1.0.6 lists: a table with the counters has its static parts; without one it does not
  // (a restart that turns the feature on over an existing table declares them).
  const std::string listed =
      R"({"nftables":[{"metainfo":{"version":"1.0.6"}},{"table":{"family":"ip","name":"kube-proxy","handle":1}},)"
      R"({"counter":{"family":"ip","name":"localhost-nodeport-rejected-udp","table":"kube-proxy","handle":2,"packets":7,"bytes":420}},)"
      R"({"counter":{"family":"ip","name":"localhost-nodeport-rejected-sctp","table":"kube-proxy","handle":3,"packets":0,"bytes":0}}]})";
  std::string error;
  auto table = nft::parseListing(listed, &error);
  REQUIRE(table);
  CHECK(table->counters == std::set<std::string, std::less<>>{"localhost-nodeport-rejected-sctp", "localhost-nodeport-rejected-udp"});
  nft::Ruleset v4only;
  v4only.tables.push_back(skeleton.tables[0]);
  for (auto& d : v4only.tables[0].sets) d.typeofSpec.clear();  // the counters alone are the question here
  CHECK(nft::staticDeclarationsListed(v4only, {*table}, {nft::Family::IPv4}));
  table->counters.erase("localhost-nodeport-rejected-udp");
  CHECK_FALSE(nft::staticDeclarationsListed(v4only, {*table}, {nft::Family::IPv4}));
}

TEST_CASE("localhost NodePorts: listeners relay real connections on 127.0.0.1, follow their endpoints, and close") {
  TagServer a("a"), b("b");
  localhost::Proxy proxy;
  const uint16_t np = freePort();
  std::map<int32_t, render::LocalhostNodePort> want{{np, {"ns1/web", {{"127.0.0.1", a.port}}, 0}}};
  auto r = proxy.sync(net::Family::V4, want);
  CHECK(r.listeners == 1);
  CHECK(r.failed.empty());
  CHECK(ask(np) == "a:hi");  // the client's bytes reach the endpoint, its answer comes back

  want[np].endpoints = {{"127.0.0.1", b.port}};
  proxy.sync(net::Family::V4, want);
  CHECK(ask(np) == "b:hi");

  // ClientIP affinity: every loopback client is one client, pinned to one endpoint.
  want[np].endpoints = {{"127.0.0.1", a.port}, {"127.0.0.1", b.port}};
  want[np].affinitySeconds = 60;
  proxy.sync(net::Family::V4, want);
  std::string first = ask(np);
  for (int i = 0; i < 10; ++i) CHECK(ask(np) == first);

  // A port some other process holds: reported, the others unaffected; gone ones close.
  TagServer squatter("s");
  want[squatter.port] = {"ns1/other", {{"127.0.0.1", a.port}}, 0};
  r = proxy.sync(net::Family::V4, want);
  CHECK(r.listeners == 1);
  REQUIRE(r.failed.size() == 1);
  CHECK(r.failed[0].first == squatter.port);
  CHECK(ask(squatter.port) == "s:hi");
  r = proxy.sync(net::Family::V4, {});
  CHECK(r.listeners == 0);
  CHECK(ask(np).empty());
  // An endpoint nobody answers on: the client's connection ends, nothing is left open.
  want = {{np, {"ns1/web", {{"127.0.0.1", freePort()}}, 0}}};
  proxy.sync(net::Family::V4, want);
  CHECK(ask(np).empty());
  for (int i = 0; i < 100 && proxy.openConnections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(proxy.openConnections() == 0);
}

// A listener whose accept fails (no descriptor left, EMFILE) must not retry in a tight loop: the
// pending connection makes every accept fail again at once, and the proxy's thread would take a
// core for as long as the node is out of descriptors. In a child process: the limit is per process.
TEST_CASE("localhost NodePorts: a listener out of descriptors retries its accept calmly") {
  TagServer a("a");
  const uint16_t np = freePort();
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    localhost::Proxy proxy;
    proxy.sync(net::Family::V4, {{np, {"ns1/web", {{"127.0.0.1", a.port}}, 0}}});
    int client = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(np);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // UBSan's vptr check opens a pipe the first time it meets a type (to test that the memory is
    // readable): meet the call's types now, while descriptors are left.
    if (proxy.acceptFailures() != 0) _exit(6);
    // Every descriptor number up to the limit taken: the listener's accept gets EMFILE.
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = 64;
    setrlimit(RLIMIT_NOFILE, &lim);
    while (dup(0) >= 0) {
    }
    if (connect(client, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) _exit(3);
    // Wait until accepting has failed at least once, then let a second pass.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (proxy.acceptFailures() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (proxy.acceptFailures() == 0) _exit(4);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // At one retry per 100 ms about 10; a tight loop makes hundreds of thousands.
    _exit(proxy.acceptFailures() <= 30 ? 0 : 5);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
