// The metrics registry: upstream's names, types, buckets and labels in the text format; what a
// sync, a failure and the health endpoints count; the process and no-local-endpoints readings;
// bind addresses and skip classification.
#include <doctest/doctest.h>

#include "pkg/api/skip_report.h"
#include "pkg/health/healthz_server.h"
#include "pkg/http/bind_address.h"
#include "pkg/metrics/least_conn_metrics.h"
#include "pkg/metrics/no_local_endpoints.h"
#include "pkg/metrics/process_collector.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/metrics/routes.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;
using namespace std::chrono_literals;

namespace {
bool has(const std::string& text, const std::string& line) {
  INFO("looking for: " << line);
  return text.find(line + "\n") != std::string::npos;
}
sync::SyncReport report(bool ok, bool full, std::chrono::nanoseconds d) {
  sync::SyncReport r;
  r.stats.ok = ok;
  r.stats.full = full;
  r.stats.plan = full ? sync::SyncStats::Plan::Full : sync::SyncStats::Plan::Incremental;
  r.stats.ops = 12;
  r.stats.bytes = 3000;
  r.stats.commitMs = 2.5;
  r.duration = d;
  r.finished = sync::WallTime{} + std::chrono::seconds(1764720000);
  return r;
}
}  // namespace

TEST_CASE("metrics: upstream's names, types, buckets and ip_family labels") {
  metrics::ProxyMetrics m({"v1.2.3-4-gabcdef", "abcdef0123"});
  // The families are known once the first sync has probed the kernel: no ip_family series before.
  CHECK(m.scrape().find("ip_family") == std::string::npos);
  m.synced(report(true, false, 3ms));
  std::string t = m.scrape();
  for (const char* h : {"kubeproxy_sync_proxy_rules_duration_seconds", "kubeproxy_sync_full_proxy_rules_duration_seconds",
                        "kubeproxy_sync_partial_proxy_rules_duration_seconds",
                        "kubeproxy_network_programming_duration_seconds", "kubeproxy_nftables_transaction_operations",
                        "kubeproxy_nftables_transaction_bytes", "kubeproxy_nftables_commit_duration_seconds"})
    CHECK(has(t, std::string("# TYPE ") + h + " histogram"));
  for (const char* g : {"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                        "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
                        "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
                        "kubeproxy_sync_proxy_rules_service_changes_pending",
                        "kubeproxy_sync_proxy_rules_no_local_endpoints_total", "kubeproxy_nftables_build_info",
                        "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"})
    CHECK(has(t, std::string("# TYPE ") + g + " gauge"));
  for (const char* c : {"kubeproxy_sync_proxy_rules_endpoint_changes_total",
                        "kubeproxy_sync_proxy_rules_service_changes_total",
                        "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                        "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", "kubeproxy_proxy_healthz_total",
                        "kubeproxy_proxy_livez_total", "process_cpu_seconds_total"})
    CHECK(has(t, std::string("# TYPE ") + c + " counter"));
  // exp(0.001, x2, 15): 1 ms .. 16.384 s
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="16.384"} 1)"));
  CHECK(t.find(R"(kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="32.768"})") == std::string::npos);
  // upstream's merge(): 0, 0.25, 0.5, 1..59, 60..115 by 5, 120..300 by 30
  for (const char* le : {"0", "0.25", "0.5", "1", "59", "60", "115", "120", "300"})
    CHECK(has(t, std::string(R"(kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le=")") + le + "\"} 0"));
  CHECK(t.find(R"(kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="330"})") == std::string::npos);
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv6",traffic_policy="external"} 0)"));
  CHECK(has(t, R"(kubeproxy_nftables_build_info{commit="abcdef0123",version="v1.2.3-4-gabcdef"} 1)"));
}

TEST_CASE("metrics: a sync, a failure and a queued change are counted as upstream counts them") {
  metrics::ProxyMetrics m({"v", "c"});
  m.queued(sync::WallTime{} + std::chrono::seconds(1764719990));
  auto ok = report(true, false, 3ms);
  ok.triggerTimes["default/web"] = ok.finished - 2s;
  m.synced(ok);
  m.synced(report(false, true, 20ms));
  std::string t = m.scrape();
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.004"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1764720000)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} 1764719990)"));
  CHECK(has(t, R"(kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="1"} 0)"));
  CHECK(has(t, R"(kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="2"} 1)"));
  CHECK(has(t, R"(kubeproxy_nftables_transaction_operations_count 2)"));
  CHECK(has(t, R"(kubeproxy_nftables_table_reconcile_total{plan="incremental",result="committed"} 1)"));
  CHECK(has(t, R"(kubeproxy_nftables_table_reconcile_total{plan="full",result="failed"} 1)"));

  m.setChangeCounts({2, 1, 7, 3});
  m.setChangeCounts({0, 0, 9, 3});  // running sums: the counters get the increase
  t = m.scrape();
  CHECK(has(t, "kubeproxy_sync_proxy_rules_endpoint_changes_total 9"));
  CHECK(has(t, "kubeproxy_sync_proxy_rules_service_changes_total 3"));
  CHECK(has(t, "kubeproxy_sync_proxy_rules_endpoint_changes_pending 0"));
}

TEST_CASE("metrics: a transaction the kernel refused as a whole counts as a failure even when the rest was "
          "committed; the refused services are a gauge and a counter of ours") {
  metrics::ProxyMetrics m({"v", "c"});
  auto isolated = report(true, false, 3ms);
  isolated.stats.transactionRejected = true;
  isolated.stats.servicesRefusedNow = 2;
  isolated.stats.rejectedServices = 2;
  m.synced(isolated);
  std::string t = m.scrape();
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv6"} 1)"));
  CHECK(has(t, "# TYPE kubeproxy_nftables_rejected_services gauge"));
  CHECK(has(t, "kubeproxy_nftables_rejected_services 2"));
  CHECK(has(t, "kubeproxy_nftables_service_rejections_total 2"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1764720000)"));

  auto recovered = report(true, false, 3ms);  // one of them programmed on its retry
  recovered.stats.rejectedServices = 1;
  m.synced(recovered);
  t = m.scrape();
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv6"} 1)"));
  CHECK(has(t, "kubeproxy_nftables_rejected_services 1"));
  CHECK(has(t, "kubeproxy_nftables_service_rejections_total 2"));
}

TEST_CASE("metrics: the healthz server counts its replies by code; the metrics server answers /proxyMode") {
  sync::FakeClock clock;
  health::ProxyHealth h(clock, 60s, {"IPv4"});
  metrics::ProxyMetrics m({"v", "c"});
  auto healthz = health::healthzServerHandler(h, clock, &m);
  CHECK(healthz({"GET", "/healthz", {}, ""}).status == 200);
  h.setNodeEligible(false);
  CHECK(healthz({"GET", "/healthz?verbose", {}, ""}).status == 503);
  CHECK(healthz({"GET", "/livez", {}, ""}).status == 200);
  CHECK(healthz({"GET", "/metrics", {}, ""}).status == 404);
  std::string t = m.scrape();
  CHECK(has(t, R"(kubeproxy_proxy_healthz_total{code="200"} 1)"));
  CHECK(has(t, R"(kubeproxy_proxy_healthz_total{code="503"} 1)"));
  CHECK(has(t, R"(kubeproxy_proxy_livez_total{code="200"} 1)"));

  m.synced(report(true, false, 3ms));
  auto server = metrics::metricsServerHandler(m);
  auto mode = server({"GET", "/proxyMode", {}, ""});
  CHECK(mode.status == 200);
  CHECK(mode.body == "nftables");
  auto scraped = server({"GET", "/metrics", {}, ""});
  CHECK(scraped.status == 200);
  CHECK(scraped.body.find("# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram") != std::string::npos);
}

// Issue 23: a node whose kernel serves one family counted each sync under both; the network
// programming and reconcile series must exist at zero before their first observation, or a rate
// over them misses it.
TEST_CASE("metrics: a single-stack node has only its family's series and counts each sync once; every series "
          "starts at zero") {
  metrics::ProxyMetrics m({"v", "c"});
  std::set<nft::Family> served;  // nothing probed yet
  m.servedFamilies([&served] { return served; });
  m.queued(sync::WallTime{} + std::chrono::seconds(1764719990));
  m.observeConntrackReconcile("IPv4", 0.01, 3);  // before the families are known: nowhere
  CHECK(m.scrape().find("ip_family") == std::string::npos);
  CHECK(has(m.scrape(), R"(kubeproxy_nftables_table_reconcile_total{plan="reconcile",result="failed"} 0)"));

  served = {nft::Family::IPv4};  // the first sync probed the kernel: no IPv6 nftables
  m.synced(report(true, true, 3ms));
  auto second = report(true, false, 2ms);
  second.triggerTimes["default/web"] = second.finished - 2s;
  m.synced(second);
  m.synced(report(false, true, 5ms));
  m.observeConntrackReconcile("IPv6", 0.01, 3);
  m.observeConntrackReconcile("IPv4", 0.01, 2);
  m.setNoLocalEndpoints({1, 4, 2, 5});
  std::string t = m.scrape();
  CHECK(t.find(R"(ip_family="IPv6")") == std::string::npos);
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3)"));
  CHECK(has(t, R"(kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2)"));
  CHECK(has(t, R"(kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1)"));
  CHECK(has(t, R"(kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family="IPv4"} 0)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1764719990)"));
  CHECK(has(t, R"(kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"} 2)"));
  CHECK(has(t, R"(kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv4"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"} 1)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"} 2)"));
  CHECK(has(t, R"(kubeproxy_nftables_table_reconcile_total{plan="full",result="committed"} 1)"));
  CHECK(has(t, R"(kubeproxy_nftables_table_reconcile_total{plan="none",result="committed"} 0)"));

  // The network programming histogram of a served family exists, at zero, from the first sync.
  metrics::ProxyMetrics fresh({"v", "c"});
  fresh.servedFamilies([] { return std::set<nft::Family>{nft::Family::IPv4, nft::Family::IPv6}; });
  fresh.synced(report(true, true, 3ms));
  t = fresh.scrape();
  CHECK(has(t, R"(kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 0)"));
  CHECK(has(t, R"(kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"} 0)"));
  CHECK(has(t, R"(kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1)"));
}

TEST_CASE("metrics: rest client requests by code, host and method") {
  metrics::ProxyMetrics m({"v", "c"});
  m.observeRestRequest("GET", "10.0.0.1:6443", 200, 0.02);
  m.observeRestRequest("GET", "10.0.0.1:6443", 0, 0.3);
  std::string t = m.scrape();
  CHECK(has(t, R"(rest_client_requests_total{code="200",host="10.0.0.1:6443",method="GET"} 1)"));
  CHECK(has(t, R"(rest_client_requests_total{code="<error>",host="10.0.0.1:6443",method="GET"} 1)"));
  CHECK(has(t, R"(rest_client_request_duration_seconds_bucket{host="10.0.0.1:6443",verb="GET",le="0.025"} 1)"));
  CHECK(has(t, R"(rest_client_request_duration_seconds_count{host="10.0.0.1:6443",verb="GET"} 2)"));
}

TEST_CASE("metrics: objects skipped, by kind and reason") {
  metrics::ProxyMetrics m({"v", "c"});
  api::setSkipSink([&](const std::string& k, const std::string& r) { m.countSkipped(k, r); });
  api::reportSkippedError("Service default/web: spec.ports[0].port: 70000 is out of range");
  api::reportSkippedError("unknown kind \"Pod\": default/x");
  api::reportSkipped("EndpointSlice", "no_service_name");
  api::setSkipSink(nullptr);
  api::reportSkipped("Service", "invalid");  // no sink: nowhere
  std::string t = m.scrape();
  CHECK(has(t, R"(kubeproxy_nftables_objects_skipped_total{kind="Service",reason="invalid"} 1)"));
  CHECK(has(t, R"(kubeproxy_nftables_objects_skipped_total{kind="unknown",reason="unknown_kind"} 1)"));
  CHECK(has(t, R"(kubeproxy_nftables_objects_skipped_total{kind="EndpointSlice",reason="no_service_name"} 1)"));
}

TEST_CASE("process metrics: /proc/self/stat parsing") {
  // A command name with spaces and a ')' in it: fields are counted after the last ')'.
  std::string stat = "4242 (kube proxy) x) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 150 0 0 20 0 7 0 1000 "
                     "104857600 2560 18446744073709551615";
  metrics::ProcessSample s;
  REQUIRE(metrics::parseProcStat(stat, 100, 4096, 1764700000, &s));
  CHECK(s.cpuSeconds == doctest::Approx(4.0));
  CHECK(s.startTimeSeconds == doctest::Approx(1764700010.0));
  CHECK(s.virtualBytes == doctest::Approx(104857600));
  CHECK(s.residentBytes == doctest::Approx(2560.0 * 4096));
  CHECK_FALSE(metrics::parseProcStat("garbage", 100, 4096, 0, &s));
  auto live = metrics::collectProcessMetrics();
  CHECK(live.size() == 6);
}

TEST_CASE("bind addresses: host:port as upstream's flags take them") {
  std::string err;
  auto a = http::parseBindAddress("0.0.0.0:10256", &err);
  REQUIRE(a);
  CHECK(a->host == "");  // wildcard: both families, as Go listens
  CHECK(a->port == 10256);
  a = http::parseBindAddress("[::1]:10249", &err);
  REQUIRE(a);
  CHECK(a->host == "::1");
  a = http::parseBindAddress("127.0.0.1:0", &err);
  REQUIRE(a);
  CHECK(a->port == 0);
  CHECK_FALSE(http::parseBindAddress("127.0.0.1", &err));
  CHECK_FALSE(http::parseBindAddress("::1:10249", &err));
  CHECK_FALSE(http::parseBindAddress("localhost:10249", &err));
  CHECK(err.find("not an IP address") != std::string::npos);
  CHECK_FALSE(http::parseBindAddress("1.2.3.4:70000", &err));
}

TEST_CASE("no local endpoints: Local policies with endpoints only elsewhere, per family; the index follows changes") {
  services::NodeConfig cfg;
  cfg.nodeName = "node-a";
  state::ClusterState st;
  auto internal = service("default", "int", {"10.96.0.10", "fd00::10"}, {port("http", 80)});
  internal->internalTrafficPolicy = "Local";
  st.upsertService(internal);
  st.upsertSlice(slice("default", "int-1", "int", {epPort("http", 8080)}, {{"10.244.2.2", std::nullopt, std::nullopt, std::nullopt, "node-b"}}));
  st.upsertSlice(slice("default", "int-2", "int", {epPort("http", 8080)}, {{"fd00:244::2", std::nullopt, std::nullopt, std::nullopt, "node-a"}}, "IPv6"));
  auto external = service("default", "ext", {"10.96.0.20"}, {port("http", 80)});
  external->type = "NodePort";
  external->ports[0].nodePort = 30080;
  external->externalTrafficPolicy = "Local";
  st.upsertService(external);
  st.upsertSlice(slice("default", "ext-1", "ext", {epPort("http", 8080)}, {{"10.244.2.3", std::nullopt, std::nullopt, std::nullopt, "node-b"}}));
  st.upsertService(service("default", "empty", {"10.96.0.30"}, {port("http", 80)}));  // no endpoints: not counted

  metrics::NoLocalEndpointsIndex idx;
  idx.update(st, cfg, nullptr);
  CHECK(idx.totals().internalV4 == 1);
  CHECK(idx.totals().internalV6 == 0);  // its IPv6 endpoint is local
  CHECK(idx.totals().externalV4 == 1);
  CHECK(idx.totals().externalV6 == 0);

  // The external service's endpoint moves here: only that service is looked at again.
  st.upsertSlice(slice("default", "ext-1", "ext", {epPort("http", 8080)}, {{"10.244.1.3", std::nullopt, std::nullopt, std::nullopt, "node-a"}}));
  std::set<std::string> changed{"default/ext"};
  idx.update(st, cfg, &changed);
  CHECK(idx.totals().externalV4 == 0);
  CHECK(idx.totals().internalV4 == 1);
  st.deleteService("default", "int");
  changed = {"default/int"};
  idx.update(st, cfg, &changed);
  CHECK(idx.totals().internalV4 == 0);
}

TEST_CASE("metrics: least connection's choices and latency, and per-endpoint gauges only with the flag") {
  metrics::ProxyMetrics m({"v1.2.3", "abcdef0123"});
  metrics::LeastConnMetrics off(m.registry(), false);
  off.setEndpointConnections({{"ns/db", "sql", "10.0.2.1:5432", 3, 1}});
  off.landed(2, 0.003);
  std::string t = m.scrape();
  CHECK(has(t, "kubeproxy_nftables_least_connection_choices_total 2"));
  CHECK(has(t, "kubeproxy_nftables_least_connection_choice_latency_seconds_count 1"));
  CHECK(has(t, "kubeproxy_nftables_least_connection_choice_latency_seconds_bucket{le=\"0.004\"} 1"));
  CHECK(t.find("kubeproxy_nftables_endpoint_connections") == std::string::npos);

  metrics::ProxyMetrics m2({"v1.2.3", "abcdef0123"});
  metrics::LeastConnMetrics on(m2.registry(), true);
  on.setEndpointConnections({{"ns/db", "sql", "10.0.2.1:5432", 3, 1}, {"ns/db", "sql", "[fd00::1]:5432", 0, 2}});
  t = m2.scrape();
  CHECK(has(t, "kubeproxy_nftables_endpoint_connections{endpoint=\"10.0.2.1:5432\",namespace=\"ns\",port=\"sql\","
               "service=\"db\",state=\"active\"} 3"));
  CHECK(has(t, "kubeproxy_nftables_endpoint_connections{endpoint=\"[fd00::1]:5432\",namespace=\"ns\",port=\"sql\","
               "service=\"db\",state=\"inactive\"} 2"));
  // An endpoint that left takes its series with it.
  on.setEndpointConnections({{"ns/db", "sql", "10.0.2.1:5432", 2, 0}});
  t = m2.scrape();
  CHECK(t.find("fd00::1") == std::string::npos);
  CHECK(has(t, "kubeproxy_nftables_endpoint_connections{endpoint=\"10.0.2.1:5432\",namespace=\"ns\",port=\"sql\","
               "service=\"db\",state=\"active\"} 2"));
}
