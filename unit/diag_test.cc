// The daemon's diagnosis side (pkg/diag, pkg/api/encode): what it hands `status` and `trace` reads
// back as it was sent; the node checks' verdicts; the socket's bounds and who may ask; work run on
// the sync loop's thread for another thread.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "pkg/api/decode.h"
#include "pkg/api/encode.h"
#include "pkg/diag/daemon_status.h"
#include "pkg/diag/local_socket.h"
#include "pkg/diag/main_thread_calls.h"
#include "pkg/diag/node_checks.h"
#include "pkg/diag/state_query.h"
#include "pkg/diag/sync_record.h"

using namespace kpn;
using namespace std::chrono_literals;

namespace {

api::DecodedObjects decodeOne(const std::string& json) {
  api::DecodedObjects out;
  std::string err;
  REQUIRE(api::decodeManifest(json, true, out, &err));
  INFO(json);
  REQUIRE(out.errors.empty());
  return out;
}

}  // namespace

TEST_CASE("api encode: every field decode reads comes back equal") {
  api::Service s;
  s.meta.ns = "shop";
  s.meta.name = "cart";
  s.meta.labels = {{"service.kubernetes.io/headless", ""}};  // of api::kReadLabels: decode drops the others
  s.meta.annotations = {{"kube-proxy-nft.io/scheduler", "round-robin"}};
  s.meta.creationTimestamp = "2024-05-01T10:00:00Z";
  s.meta.resourceVersion = "42";
  s.type = "LoadBalancer";
  s.clusterIPs = {"10.96.0.10", "fd00::10"};
  api::ServicePort p;
  p.name = "http";
  p.port = 80;
  p.nodePort = 30080;
  p.targetPort = "web";
  api::ServicePort q;
  q.name = "dns";
  q.protocol = api::Protocol::UDP;
  q.port = 53;
  q.targetPort = "5353";
  s.ports = {p, q};
  s.externalIPs = {"192.0.2.1"};
  s.loadBalancerSourceRanges = {"203.0.113.0/25"};
  s.sourceRangeUnreadable = true;
  s.loadBalancerIngress = {{"198.51.100.1", "", "VIP"}, {"", "lb.example", ""}};
  s.externalTrafficPolicy = "Local";
  s.internalTrafficPolicy = "Local";
  s.sessionAffinity = "ClientIP";
  s.sessionAffinityTimeoutSeconds = 600;
  s.healthCheckNodePort = 32000;
  s.trafficDistribution = "PreferClose";
  auto d = decodeOne(api::encodeService(s));
  REQUIRE(d.services.size() == 1);
  CHECK(d.services[0] == s);

  api::Service headless;
  headless.meta.ns = "default";
  headless.meta.name = "db";
  headless.headless = true;
  CHECK(decodeOne(api::encodeService(headless)).services.at(0) == headless);
  api::Service alias;
  alias.meta.ns = "default";
  alias.meta.name = "ext";
  alias.type = "ExternalName";
  alias.externalName = "example.com";
  CHECK(decodeOne(api::encodeService(alias)).services.at(0) == alias);

  api::EndpointSlice es;
  es.meta.ns = "shop";
  es.meta.name = "cart-abc";
  es.serviceName = "cart";  // encoded as the label kubernetes.io/service-name, decoded back into serviceName alone
  es.meta.annotations["endpoints.kubernetes.io/last-change-trigger-time"] = "2024-05-01T10:00:00Z";
  es.addressType = "IPv4";
  api::EndpointPort ep;
  ep.name = "http";
  ep.port = 8080;
  es.ports = {ep};
  api::Endpoint e1;
  e1.address = "10.244.0.5";
  e1.conditions.ready = false;
  e1.conditions.serving = true;
  e1.conditions.terminating = true;
  e1.nodeName = "node-a";
  e1.zone = "zone-a";
  e1.setHints({"zone-a"}, {"node-a"});
  api::Endpoint e2;
  e2.address = "10.244.0.6";
  es.endpoints = {e1, e2};
  CHECK(decodeOne(api::encodeEndpointSlice(es)).slices.at(0) == es);

  api::Node n;
  n.meta.name = "node-a";
  n.podCIDRs = {"10.244.0.0/24"};
  n.addresses = {{"InternalIP", "192.168.1.1"}, {"Hostname", "node-a"}};
  n.deletionTimestamp = "2024-05-01T10:00:00Z";
  n.taintKeys = {"ToBeDeletedByClusterAutoscaler"};
  CHECK(decodeOne(api::encodeNode(n)).nodes.at(0) == n);
  api::ServiceCIDR c;
  c.meta.name = "kubernetes";
  c.cidrs = {"10.96.0.0/16", "fd00:10:96::/112"};
  CHECK(decodeOne(api::encodeServiceCIDR(c)).serviceCIDRs.at(0) == c);
}

TEST_CASE("status JSON: read back as written; an error answer or another body is not a status") {
  diag::DaemonStatus s;
  s.version = "0.1.0";
  s.commit = "abc";
  s.pid = 42;
  s.node = "node-a";
  s.source = {"api", "API server https://x", false, "EndpointSlices", false,
              {{"Services", true, ""}, {"EndpointSlices", false, "list: HTTP 500"}}};
  s.syncs = 7;
  s.consecutiveFailures = 2;
  s.lastSuccess = diag::SyncSuccess{"2024-01-01T00:00:00Z", 3.5, "incremental", 12, 1.25};
  s.lastFailure = diag::SyncFailure{"2024-01-01T00:00:01Z", 2.5, "Operation not permitted"};
  s.servicesKnown = 3;
  s.servicesProgrammed = 2;
  s.refused = {{"default/bad", "EPERM", "2024-01-01T00:00:00Z"}};
  s.families = {"ip"};
  s.repairs = 1;
  s.events = diag::EventCounts{2, 1, 0};
  std::string err;
  auto back = diag::parseStatus(diag::statusJson(s), &err);
  REQUIRE(back);
  CHECK(diag::statusJson(*back) == diag::statusJson(s));
  std::string text = diag::statusText(s);
  CHECK(text.find("source: API server https://x — NOT connected, not synced yet (waiting for EndpointSlices)") !=
        std::string::npos);
  CHECK(text.find("EndpointSlices: not listed yet; last request failed: list: HTTP 500") != std::string::npos);
  CHECK(text.find("refused: default/bad since 2024-01-01T00:00:00Z: EPERM") != std::string::npos);
  CHECK(text.find("2 in a row now): Operation not permitted") != std::string::npos);
  CHECK_FALSE(diag::parseStatus("{\"error\":\"busy\"}", &err));
  CHECK(err == "busy");
  CHECK_FALSE(diag::parseStatus("{\"x\":1}", &err));
  CHECK_FALSE(diag::parseStatus("not json", &err));
}

TEST_CASE("state questions: what a client may ask is validated before anything is looked up") {
  std::string err;
  diag::StateQuery q;
  q.kind = diag::StateQuery::Kind::Service;
  q.ns = "shop";
  q.name = "cart";
  auto back = diag::parseQuery(diag::queryLine(q), &err);
  REQUIRE(back);
  CHECK((back->ns == "shop" && back->name == "cart" && back->kind == diag::StateQuery::Kind::Service));
  q = {};
  q.kind = diag::StateQuery::Kind::Address;
  q.ip = "fd00::1";
  q.port = 80;
  q.protocol = "udp";
  back = diag::parseQuery(diag::queryLine(q), &err);
  REQUIRE(back);
  CHECK((back->ip == "fd00::1" && back->port == 80 && back->protocol == "udp"));
  CHECK(diag::parseQuery("{\"query\":\"status\"}", &err)->kind == diag::StateQuery::Kind::Status);
  for (const char* bad : {"{\"query\":\"service\",\"namespace\":\"a/b\",\"name\":\"c\"}",
                          "{\"query\":\"service\",\"namespace\":\"a\",\"name\":\"C\"}",
                          "{\"query\":\"address\",\"ip\":\"10.0.0.256\",\"port\":80,\"protocol\":\"tcp\"}",
                          "{\"query\":\"address\",\"ip\":\"10.0.0.1\",\"port\":70000,\"protocol\":\"tcp\"}",
                          "{\"query\":\"address\",\"ip\":\"10.0.0.1\",\"port\":80,\"protocol\":\"icmp\"}",
                          "{\"query\":\"everything\"}", "[]", ""}) {
    INFO(bad);
    CHECK_FALSE(diag::parseQuery(bad, &err));
  }
}

TEST_CASE("state answer: the objects come back through the manifest decoder, the excluded Service beside them") {
  api::Service s;
  s.meta.ns = "default";
  s.meta.name = "web";
  s.clusterIPs = {"10.96.0.10"};
  api::Service other = s;
  other.meta.name = "other";
  other.meta.labels["service.kubernetes.io/service-proxy-name"] = "x";
  diag::DaemonStatus st;
  st.version = "v";
  st.servicesKnown = 9;
  std::string json = diag::stateAnswerJson(diag::statusJson(st), "kind: KubeProxyConfiguration\n", "node-a",
                                           {api::encodeService(s)}, api::encodeService(other), "");
  std::string err;
  auto a = diag::parseStateAnswer(json, &err);
  REQUIRE(a);
  CHECK(a->status.servicesKnown == 9);
  CHECK(a->nodeName == "node-a");
  CHECK(a->configYaml == "kind: KubeProxyConfiguration\n");
  REQUIRE(a->objects.services.size() == 1);
  CHECK(a->objects.services[0] == s);
  REQUIRE(a->excluded);
  CHECK(*a->excluded == other);
  CHECK_FALSE(diag::parseStateAnswer("{\"error\":\"late\"}", &err));
  CHECK(err == "late");
}

TEST_CASE("node checks: forwarding off, no br_netfilter, a full conntrack table, leftovers, a forward drop policy") {
  std::map<std::string, std::string> files = {
      {"/proc/sys/net/ipv4/ip_forward", "0\n"},
      {"/proc/sys/net/ipv6/conf/all/forwarding", "1\n"},
      {"/proc/sys/net/netfilter/nf_conntrack_max", "1000\n"},
      {"/proc/sys/net/netfilter/nf_conntrack_count", "950\n"},
      {"/proc/net/ip_tables_names", "filter\nnat\n"},
      {"/proc/net/ip_vs", "IP Virtual Server version 1.2.1\nProt LocalAddress:Port\nTCP  0A60000A:0050 rr\n"},
  };
  diag::NodeFacts f;
  f.readFile = [&](const char* p) -> std::optional<std::string> {
    auto it = files.find(p);
    return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  f.interfaceExists = [](const char* name) { return std::string(name) == "kube-ipvs0"; };
  f.chains = [](std::string*) -> std::optional<std::vector<iptables::ListedChainInfo>> {
    std::vector<iptables::ListedChainInfo> c(4);
    c[0] = {"ip", "filter", "FORWARD", true, "filter", "forward", 0, "drop"};
    c[1] = {"ip", "nat", "KUBE-SERVICES", false, "", "", 0, ""};
    c[2] = {"ip", "kube-proxy", "filter-forward", true, "filter", "forward", 0, "drop"};  // ours: not counted
    c[3] = {"inet", "fw", "input", true, "filter", "input", 0, "drop"};                  // not forward
    return c;
  };
  std::map<std::string, diag::NodeCheck> by;
  for (auto& c : diag::runNodeChecks(f)) by[c.name + (c.name == "forward-drop" ? "/" + c.message.substr(0, 20) : "")] = c;
  CHECK(by["ip_forward"].level == "warning");
  CHECK(by["ipv6_forwarding"].level == "ok");
  CHECK(by["br_netfilter"].level == "info");
  CHECK(by["conntrack"].level == "warning");
  CHECK(by["conntrack"].message.rfind("950 of 1000 entries in use", 0) == 0);
  CHECK(by["iptables-legacy"].level == "warning");
  CHECK(by["ipvs"].level == "warning");
  CHECK(by["ipvs"].message.rfind("the kube-ipvs0 interface and 1 IPVS virtual services", 0) == 0);
  CHECK(by["iptables-nft"].level == "warning");
  size_t drops = 0;
  for (const auto& [k, c] : by)
    if (c.name == "forward-drop") {
      ++drops;
      CHECK(c.level == "warning");
      CHECK(c.message.rfind("table ip filter chain FORWARD (priority 0) drops forwarded packets", 0) == 0);
    }
  CHECK(drops == 1);

  files["/proc/sys/net/ipv4/ip_forward"] = "1";
  files["/proc/sys/net/bridge/bridge-nf-call-iptables"] = "1";
  files["/proc/sys/net/netfilter/nf_conntrack_count"] = "10";
  files.erase("/proc/net/ip_tables_names");
  files.erase("/proc/net/ip_vs");
  f.interfaceExists = [](const char*) { return false; };
  f.chains = [](std::string*) { return std::optional<std::vector<iptables::ListedChainInfo>>(std::vector<iptables::ListedChainInfo>{}); };
  for (const auto& c : diag::runNodeChecks(f)) {
    INFO(c.name << ": " << c.message);
    CHECK(c.level == "ok");
  }
  f.chains = [](std::string* e) -> std::optional<std::vector<iptables::ListedChainInfo>> {
    *e = "Operation not permitted";
    return std::nullopt;
  };
  for (const auto& c : diag::runNodeChecks(f))
    if (c.name == "forward-drop") CHECK(c.level == "unknown");
}

TEST_CASE("main-thread calls: work runs where the loop ticks; late work is not run for a caller that gave up") {
  diag::MainThreadCalls calls;
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    while (!stop) {
      calls.runQueued();
      std::this_thread::sleep_for(5ms);
    }
  });
  auto here = std::this_thread::get_id();
  std::thread::id ranOn;
  auto r = calls.call([&] {
    ranOn = std::this_thread::get_id();
    return std::string("answer");
  }, 2s);
  CHECK(r == std::optional<std::string>("answer"));
  CHECK((ranOn != here));
  stop = true;
  loop.join();
  // Nobody ticks: the call gives up, and its work is never run afterwards.
  bool ran = false;
  CHECK_FALSE(calls.call([&ran] {
    ran = true;
    return std::string();
  }, 50ms));
  calls.runQueued();
  CHECK_FALSE(ran);
  calls.close();
  CHECK_FALSE(calls.call([] { return std::string("x"); }, 1s));
}

TEST_CASE("local socket: one answer per request line; other users are refused; a taken name is an error") {
  std::string name = "@kpn-unit-" + std::to_string(getpid()), err;
  auto server = diag::LocalSocketServer::start(name, [](const std::string& line) { return "echo " + line; }, &err);
  REQUIRE(server);
  CHECK(diag::askLocalSocket(name, "status", 2000, &err) == std::optional<std::string>("echo status\n"));
  CHECK_FALSE(diag::LocalSocketServer::start(name, [](const std::string&) { return ""; }, &err));
  CHECK(err.find("Address already in use") != std::string::npos);
  // A request line over 4 KiB is cut off unanswered.
  CHECK_FALSE(diag::askLocalSocket(name, std::string(10000, 'x'), 3000, &err));
  if (geteuid() == 0) {
    pid_t child = fork();
    if (child == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
      std::string e;
      _exit(diag::askLocalSocket(name, "status", 2000, &e) ? 1 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // no answer for uid 65534
    CHECK(server->refused() == 1);
  }
  server.reset();
  CHECK_FALSE(diag::askLocalSocket(name, "status", 1000, &err));
  CHECK(err.find("no daemon answers") == 0);
}

TEST_CASE("sync record: the last success and failure (with the syncer's reason), repairs after the first sync") {
  diag::SyncRecord r;
  sync::SyncReport rep;
  rep.stats.ok = true;
  rep.stats.plan = sync::SyncStats::Plan::Reconcile;  // start-up
  r.synced(rep);
  CHECK(r.repairs() == 0);
  rep.stats.plan = sync::SyncStats::Plan::Reconcile;  // a repair
  r.synced(rep);
  CHECK(r.repairs() == 1);
  r.syncFailed("Operation not permitted");
  sync::SyncReport bad;
  bad.consecutiveFailures = 1;
  r.synced(bad);
  REQUIRE(r.lastFailure());
  CHECK(r.lastFailure()->error == "Operation not permitted");
  CHECK(r.consecutiveFailures() == 1);
  r.serviceRefused("default/bad", "EPERM");
  CHECK(r.refusals().at("default/bad").error == "EPERM");
  r.serviceProgrammedAgain("default/bad");
  CHECK(r.refusals().empty());
  r.synced(rep);
  CHECK(r.consecutiveFailures() == 0);
  CHECK(r.syncs() == 4);
}
