#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "pkg/health/service_health.h"
#include "unit/http_client.h"

using namespace kpn;
using namespace kpn::testing;
using health::ServiceHealthInfo;
using health::ServiceHealthServers;

namespace {

std::string body(const std::string& ns, const std::string& name, int n, bool healthy, const std::string& reason = "") {
  return R"({"service":{"namespace":")" + ns + R"(","name":")" + name + R"("},"localEndpoints":)" +
         std::to_string(n) + R"(,"serviceProxyHealthy":)" + (healthy ? "true" : "false") +
         (healthy ? "" : R"(,"reason":"kube-proxy is unhealthy: )" + reason + "\"") + "}";
}

const health::ProxyVerdict kHealthy{true, ""};
const health::ProxyVerdict kStale{false, "IPv4: a change has waited 61.0s for a successful sync (limit 60.0s)"};

// A socket of "another program" holding ip:port.
source::UniqueFd occupy(const std::string& ip, int port) {
  sockaddr_storage ss;
  socklen_t len = socketAddress(ip, port, &ss);
  source::UniqueFd fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0);
  REQUIRE(::listen(fd.get(), 1) == 0);
  return fd;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(2000)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace

TEST_CASE("service health: the reply is upstream's JSON, 200 only with local endpoints and a healthy proxy") {
  auto ok = health::serviceHealthResponse({"default", "web", 2}, kHealthy);
  CHECK(ok.status == 200);
  CHECK(ok.body == R"({"service":{"namespace":"default","name":"web"},"localEndpoints":2,"serviceProxyHealthy":true})");
  CHECK(ok.headers == http::Headers{{"Content-Type", "application/json"},
                                    {"X-Content-Type-Options", "nosniff"},
                                    {"X-Load-Balancing-Endpoint-Weight", "2"}});
  auto none = health::serviceHealthResponse({"default", "web", 0}, kHealthy);
  CHECK(none.status == 503);
  CHECK(none.body == body("default", "web", 0, true));  // upstream's body exactly: no reason field
  // Beyond upstream: the proxy's own reason, so whoever reads the load balancer's log sees why.
  auto stale = health::serviceHealthResponse({"default", "web", 2}, kStale);
  CHECK(stale.status == 503);
  CHECK(stale.body == body("default", "web", 2, false, kStale.reason));
}

TEST_CASE("service health: each port answers any path for its own service over real HTTP, 200 or 503") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1"});
  int p1 = freePort(), p2 = freePort();
  hs.update({{p1, {"ns1", "web", 3}}, {p2, {"ns2", "db", 0}}});
  CHECK(hs.listeningPorts() == std::vector<int>{std::min(p1, p2), std::max(p1, p2)});

  HttpReply r = get("127.0.0.1", p1, "/");
  CHECK(r.status == 200);
  CHECK(r.body == body("ns1", "web", 3, true));
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.header("x-content-type-options") == "nosniff");
  CHECK(r.header("x-load-balancing-endpoint-weight") == "3");
  CHECK(get("127.0.0.1", p1, "/any/path?at=all").body == body("ns1", "web", 3, true));

  HttpReply none = get("127.0.0.1", p2, "/healthz");
  CHECK(none.status == 503);
  CHECK(none.body == body("ns2", "db", 0, true));
}

TEST_CASE("service health: new counts apply to the next request, on the same keep-alive connection") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1"});
  int p = freePort();
  hs.update({{p, {"ns", "web", 1}}});
  HttpConnection c("127.0.0.1", p);
  auto ask = [&] {
    REQUIRE(c.send(getRequest("/")));
    auto r = c.readReply();
    REQUIRE(r);
    return *r;
  };
  CHECK(ask().status == 200);
  hs.update({{p, {"ns", "web", 0}}});
  HttpReply down = ask();
  CHECK(down.status == 503);
  CHECK(down.body == body("ns", "web", 0, true));
  hs.update({{p, {"ns", "web", 5}}});
  HttpReply up = ask();
  CHECK(up.status == 200);
  CHECK(up.body == body("ns", "web", 5, true));
}

TEST_CASE("service health: an unhealthy proxy answers 503 everywhere, and 200 again once healthy") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1"});
  int p = freePort();
  hs.update({{p, {"ns", "web", 2}}});
  hs.setProxyHealth(kStale);
  HttpReply r = get("127.0.0.1", p);
  CHECK(r.status == 503);
  CHECK(r.body == body("ns", "web", 2, false, kStale.reason));
  hs.setProxyHealth(kHealthy);
  CHECK(get("127.0.0.1", p).status == 200);
}

TEST_CASE("service health: a removed service's port refuses connections and its open ones close; the others stay") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1"});
  int gone = freePort(), kept = freePort();
  hs.update({{gone, {"ns", "gone", 1}}, {kept, {"ns", "kept", 1}}});
  HttpConnection open("127.0.0.1", gone);
  REQUIRE(open.send(getRequest("/")));
  REQUIRE(open.readReply());
  HttpConnection keptConn("127.0.0.1", kept);
  REQUIRE(keptConn.send(getRequest("/")));
  REQUIRE(keptConn.readReply());

  hs.update({{kept, {"ns", "kept", 1}}});
  CHECK(hs.listeningPorts() == std::vector<int>{kept});
  CHECK(open.closedByPeer());
  CHECK(HttpConnection("127.0.0.1", gone).error() == ECONNREFUSED);
  REQUIRE(keptConn.send(getRequest("/")));  // a kept port keeps its connections
  auto r = keptConn.readReply();
  REQUIRE(r);
  CHECK(r->status == 200);

  hs.update({});
  CHECK(hs.listeningPorts().empty());
  CHECK(HttpConnection("127.0.0.1", kept).error() == ECONNREFUSED);
}

TEST_CASE("service health: a port held by another program is reported, retried, and served once freed") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1", "::1"}, std::chrono::milliseconds(20));
  int p = freePort();
  auto blocker = occupy("127.0.0.1", p);
  hs.update({{p, {"ns", "web", 1}}});  // no exception, no abort
  CHECK(hs.listeningPorts().empty());
  auto errors = hs.bindErrors();
  REQUIRE(errors.count(p) == 1);
  CHECK(errors[p] == "bind 127.0.0.1:" + std::to_string(p) + ": Address already in use");
  CHECK(get("::1", p).status == 200);  // the address that could bind serves meanwhile

  blocker.reset();
  CHECK(eventually([&] { return hs.listeningPorts() == std::vector<int>{p}; }));
  CHECK(hs.bindErrors().empty());
  CHECK(get("127.0.0.1", p).body == body("ns", "web", 1, true));
}

TEST_CASE("service health: a port that never binds stays reported until its service leaves") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1"}, std::chrono::milliseconds(20));
  int p = freePort();
  auto blocker = occupy("127.0.0.1", p);
  hs.update({{p, {"ns", "web", 1}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // several retries
  CHECK(hs.bindErrors().count(p) == 1);
  hs.update({});
  CHECK(hs.bindErrors().empty());
  blocker.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(HttpConnection("127.0.0.1", p).error() == ECONNREFUSED);  // no retry binds a departed service
}

TEST_CASE("service health: no bind addresses listens on both families; explicit ones only where given") {
  http::Loop loop;
  int p = freePort();
  {
    ServiceHealthServers all(loop, {});
    all.update({{p, {"ns", "web", 1}}});
    CHECK(get("127.0.0.1", p).status == 200);
    CHECK(get("::1", p).status == 200);
  }
  ServiceHealthServers v6(loop, {"::1"});
  v6.update({{p, {"ns", "web", 1}}});
  CHECK(get("::1", p).body == body("ns", "web", 1, true));
  CHECK(HttpConnection("127.0.0.1", p).error() == ECONNREFUSED);
}

TEST_CASE("service health: ports outside 1..65535 are skipped; the rest are served") {
  http::Loop loop;
  ServiceHealthServers hs(loop, {"127.0.0.1"});
  int p = freePort();
  hs.update({{0, {"ns", "zero", 1}}, {70000, {"ns", "big", 1}}, {p, {"ns", "web", 1}}});
  CHECK(hs.listeningPorts() == std::vector<int>{p});
  CHECK(hs.bindErrors().empty());
}
