#include "pkg/metrics/proxy_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>

#include "pkg/metrics/process_collector.h"
#include "pkg/services/family.h"

namespace kpn::metrics {

namespace {

using prometheus::Histogram;

Histogram::BucketBoundaries exponential(double start, double factor, int count) {
  Histogram::BucketBoundaries b;
  for (int i = 0; i < count; ++i, start *= factor) b.push_back(start);
  return b;
}

void linear(Histogram::BucketBoundaries& b, double start, double width, int count) {
  for (int i = 0; i < count; ++i) b.push_back(start + width * i);
}

// Upstream's merge() starts from a 0 bucket, then 0.25 s, 0.5 s, 1..59 s, 60..115 s, 2..5 min.
Histogram::BucketBoundaries programmingBuckets() {
  Histogram::BucketBoundaries b{0};
  linear(b, 0.25, 0.25, 2);
  linear(b, 1, 1, 59);
  linear(b, 60, 5, 12);
  linear(b, 120, 30, 7);
  return b;
}

const Histogram::BucketBoundaries kSyncBuckets = exponential(0.001, 2, 15);
const Histogram::BucketBoundaries kRestBuckets{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0};

// Per-family series, by the family's index (label ip_family: services::familyWord).
constexpr size_t kFamilyCount = 2;
size_t index(nft::Family f) { return f == nft::Family::IPv6 ? 1 : 0; }

double seconds(sync::WallTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

const char* planName(sync::SyncStats::Plan p) {
  switch (p) {
    case sync::SyncStats::Plan::Incremental: return "incremental";
    case sync::SyncStats::Plan::Reconcile: return "reconcile";
    case sync::SyncStats::Plan::Full: return "full";
    case sync::SyncStats::Plan::None: break;
  }
  return "none";  // the kernel tables could not be listed: nothing was planned
}

// One family's series, created when the family is known to be served.
struct FamilySeries {
  prometheus::Histogram *sync, *syncFull, *syncPartial, *programming, *conntrack;
  prometheus::Gauge *last, *lastQueued, *noLocalInternal, *noLocalExternal;
  prometheus::Counter *failures, *conntrackDeleted;
};

}  // namespace

struct ProxyMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : syncDuration(prometheus::BuildHistogram()
                         .Name("kubeproxy_sync_proxy_rules_duration_seconds")
                         .Help("SyncProxyRules latency in seconds")
                         .Register(r)),
        syncFullDuration(prometheus::BuildHistogram()
                             .Name("kubeproxy_sync_full_proxy_rules_duration_seconds")
                             .Help("SyncProxyRules latency in seconds for full resyncs")
                             .Register(r)),
        syncPartialDuration(prometheus::BuildHistogram()
                                .Name("kubeproxy_sync_partial_proxy_rules_duration_seconds")
                                .Help("SyncProxyRules latency in seconds for partial resyncs")
                                .Register(r)),
        lastTimestamp(prometheus::BuildGauge()
                          .Name("kubeproxy_sync_proxy_rules_last_timestamp_seconds")
                          .Help("The last time proxy rules were successfully synced")
                          .Register(r)),
        lastQueuedTimestamp(prometheus::BuildGauge()
                                .Name("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds")
                                .Help("The last time a sync of proxy rules was queued")
                                .Register(r)),
        programming(prometheus::BuildHistogram()
                        .Name("kubeproxy_network_programming_duration_seconds")
                        .Help("In Cluster Network Programming Latency in seconds")
                        .Register(r)),
        endpointPending(prometheus::BuildGauge()
                            .Name("kubeproxy_sync_proxy_rules_endpoint_changes_pending")
                            .Help("Pending proxy rules Endpoint changes")
                            .Register(r)),
        endpointTotal(prometheus::BuildCounter()
                          .Name("kubeproxy_sync_proxy_rules_endpoint_changes_total")
                          .Help("Cumulative proxy rules Endpoint changes")
                          .Register(r)),
        servicePending(prometheus::BuildGauge()
                           .Name("kubeproxy_sync_proxy_rules_service_changes_pending")
                           .Help("Pending proxy rules Service changes")
                           .Register(r)),
        serviceTotal(prometheus::BuildCounter()
                         .Name("kubeproxy_sync_proxy_rules_service_changes_total")
                         .Help("Cumulative proxy rules Service changes")
                         .Register(r)),
        syncFailures(prometheus::BuildCounter()
                         .Name("kubeproxy_sync_proxy_rules_nftables_sync_failures_total")
                         .Help("Cumulative proxy nftables sync failures")
                         .Register(r)),
        cleanupFailures(prometheus::BuildCounter()
                            .Name("kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total")
                            .Help("Cumulative proxy nftables cleanup failures")
                            .Register(r)),
        healthz(prometheus::BuildCounter()
                    .Name("kubeproxy_proxy_healthz_total")
                    .Help("Cumulative proxy healthz HTTP status")
                    .Register(r)),
        livez(prometheus::BuildCounter()
                  .Name("kubeproxy_proxy_livez_total")
                  .Help("Cumulative proxy livez HTTP status")
                  .Register(r)),
        noLocal(prometheus::BuildGauge()
                    .Name("kubeproxy_sync_proxy_rules_no_local_endpoints_total")
                    .Help("Number of services with a Local traffic policy and no endpoints")
                    .Register(r)),
        restRequests(prometheus::BuildCounter()
                         .Name("rest_client_requests_total")
                         .Help("Number of HTTP requests, partitioned by status code, method, and host.")
                         .Register(r)),
        restDuration(prometheus::BuildHistogram()
                         .Name("rest_client_request_duration_seconds")
                         .Help("Request latency in seconds. Broken down by verb, and host.")
                         .Register(r)),
        txnOps(prometheus::BuildHistogram()
                   .Name("kubeproxy_nftables_transaction_operations")
                   .Help("Operations (add, delete, flush...) in each committed or rejected nftables transaction")
                   .Register(r)),
        txnBytes(prometheus::BuildHistogram()
                     .Name("kubeproxy_nftables_transaction_bytes")
                     .Help("Size of each nftables transaction as JSON sent to libnftables, in bytes")
                     .Register(r)),
        commitDuration(prometheus::BuildHistogram()
                           .Name("kubeproxy_nftables_commit_duration_seconds")
                           .Help("Time libnftables took to commit (or reject) one transaction")
                           .Register(r)),
        skipped(prometheus::BuildCounter()
                    .Name("kubeproxy_nftables_objects_skipped_total")
                    .Help("API objects dropped as invalid (their last good version, if any, stays), by kind and reason")
                    .Register(r)),
        eventsDropped(prometheus::BuildCounter()
                          .Name("kubeproxy_nftables_events_dropped_total")
                          .Help("Kubernetes Events not sent, by reason: queue_full, rate_limited, api_unavailable "
                                "(no answer after retries), rejected (the API server refused it)")
                          .Register(r)),
        reconcile(prometheus::BuildCounter()
                      .Name("kubeproxy_nftables_table_reconcile_total")
                      .Help("Syncs by how they were planned (incremental, reconcile with the listed tables at "
                            "start-up, full rebuild) and whether the kernel took them")
                      .Register(r)),
        rejectedServices(prometheus::BuildGauge()
                             .Name("kubeproxy_nftables_rejected_services")
                             .Help("Services whose rules the kernel refuses, left out of the ruleset and retried with backoff")
                             .Register(r)),
        serviceRejections(prometheus::BuildCounter()
                              .Name("kubeproxy_nftables_service_rejections_total")
                              .Help("Times a sync found a service whose rules the kernel refuses (by bisection of a "
                                    "rejected transaction); everything else was programmed")
                              .Register(r)),
        conntrackDuration(prometheus::BuildHistogram()
                              .Name("kubeproxy_conntrack_reconciler_sync_duration_seconds")
                              .Help("ReconcileConntrackFlowsLatency latency in seconds")
                              .Register(r)),
        conntrackDeleted(prometheus::BuildCounter()
                             .Name("kubeproxy_conntrack_reconciler_deleted_entries_total")
                             .Help("Cumulative conntrack flows deleted by conntrack reconciler")
                             .Register(r)),
        buildInfo(prometheus::BuildGauge()
                      .Name("kubeproxy_nftables_build_info")
                      .Help("Always 1; labels say the version and the commit this binary was built from")
                      .Register(r)) {
    endpointPendingG = &endpointPending.Add({});
    endpointTotalC = &endpointTotal.Add({});
    servicePendingG = &servicePending.Add({});
    serviceTotalC = &serviceTotal.Add({});
    for (const char* code : {"200", "503"}) {
      healthz.Add({{"code", code}});
      livez.Add({{"code", code}});
    }
    // Every plan and result from the start, so that a rate or an increase sees the first one.
    for (auto plan : {sync::SyncStats::Plan::Incremental, sync::SyncStats::Plan::Reconcile,
                      sync::SyncStats::Plan::Full, sync::SyncStats::Plan::None})
      for (const char* result : {"committed", "failed"}) reconcile.Add({{"plan", planName(plan)}, {"result", result}});
    opsH = &txnOps.Add({}, exponential(1, 4, 11));
    bytesH = &txnBytes.Add({}, exponential(256, 4, 11));
    commitH = &commitDuration.Add({}, exponential(0.0005, 2, 16));
    rejectedG = &rejectedServices.Add({});
    rejectionsC = &serviceRejections.Add({});
  }

  prometheus::Family<prometheus::Histogram>& syncDuration;
  prometheus::Family<prometheus::Histogram>& syncFullDuration;
  prometheus::Family<prometheus::Histogram>& syncPartialDuration;
  prometheus::Family<prometheus::Gauge>& lastTimestamp;
  prometheus::Family<prometheus::Gauge>& lastQueuedTimestamp;
  prometheus::Family<prometheus::Histogram>& programming;
  prometheus::Family<prometheus::Gauge>& endpointPending;
  prometheus::Family<prometheus::Counter>& endpointTotal;
  prometheus::Family<prometheus::Gauge>& servicePending;
  prometheus::Family<prometheus::Counter>& serviceTotal;
  prometheus::Family<prometheus::Counter>& syncFailures;
  prometheus::Family<prometheus::Counter>& cleanupFailures;
  prometheus::Family<prometheus::Counter>& healthz;
  prometheus::Family<prometheus::Counter>& livez;
  prometheus::Family<prometheus::Gauge>& noLocal;
  prometheus::Family<prometheus::Counter>& restRequests;
  prometheus::Family<prometheus::Histogram>& restDuration;
  prometheus::Family<prometheus::Histogram>& txnOps;
  prometheus::Family<prometheus::Histogram>& txnBytes;
  prometheus::Family<prometheus::Histogram>& commitDuration;
  prometheus::Family<prometheus::Counter>& skipped;
  prometheus::Family<prometheus::Counter>& eventsDropped;
  prometheus::Family<prometheus::Counter>& reconcile;
  prometheus::Family<prometheus::Gauge>& rejectedServices;
  prometheus::Family<prometheus::Counter>& serviceRejections;
  prometheus::Family<prometheus::Histogram>& conntrackDuration;
  prometheus::Family<prometheus::Counter>& conntrackDeleted;
  prometheus::Family<prometheus::Gauge>& buildInfo;

  // Written on the sync loop's thread, each family's series before its bit in `served`: a
  // reader on another thread that sees the bit (acquire) sees the series.
  std::array<FamilySeries, kFamilyCount> family{};
  std::atomic<unsigned> served{0};  // bit i: family i
  std::optional<double> lastQueuedAt;  // a change queued before the families were known
  template <class F>
  void eachServed(F&& f) {
    unsigned mask = served.load(std::memory_order_acquire);
    for (size_t i = 0; i < kFamilyCount; ++i)
      if (mask & (1u << i)) f(family[i]);
  }
  prometheus::Gauge* endpointPendingG;
  prometheus::Counter* endpointTotalC;
  prometheus::Gauge* servicePendingG;
  prometheus::Counter* serviceTotalC;
  prometheus::Histogram *opsH, *bytesH, *commitH;
  prometheus::Gauge* rejectedG;
  prometheus::Counter* rejectionsC;
  // The change totals arrive as running sums from the state; the counters get the increase.
  std::mutex countersMu;
  uint64_t endpointSeen = 0, serviceSeen = 0;  // totals already added to the counters
};

ProxyMetrics::ProxyMetrics(const BuildInfo& build)
    : registry_(std::make_shared<prometheus::Registry>()), f_(std::make_unique<Families>(*registry_)) {
  f_->buildInfo.Add({{"version", build.version}, {"commit", build.commit}}).Set(1);
}

ProxyMetrics::~ProxyMetrics() = default;

// Creates the series of each family in `families` not served yet (families are added, never
// removed: what the kernel runs does not change under a running daemon).
void ProxyMetrics::serve(const std::set<nft::Family>& families) {
  Families& f = *f_;
  unsigned mask = f.served.load(std::memory_order_relaxed);
  for (nft::Family fam : families) {
    const size_t i = index(fam);
    if (mask & (1u << i)) continue;
    const prometheus::Labels l{{"ip_family", services::familyWord(fam)}};
    FamilySeries& s = f.family[i];
    s.sync = &f.syncDuration.Add(l, kSyncBuckets);
    s.syncFull = &f.syncFullDuration.Add(l, kSyncBuckets);
    s.syncPartial = &f.syncPartialDuration.Add(l, kSyncBuckets);
    s.programming = &f.programming.Add(l, programmingBuckets());
    s.conntrack = &f.conntrackDuration.Add(l, kSyncBuckets);
    s.last = &f.lastTimestamp.Add(l);
    s.lastQueued = &f.lastQueuedTimestamp.Add(l);
    if (f.lastQueuedAt) s.lastQueued->Set(*f.lastQueuedAt);
    s.noLocalInternal = &f.noLocal.Add({{"traffic_policy", "internal"}, {"ip_family", services::familyWord(fam)}});
    s.noLocalExternal = &f.noLocal.Add({{"traffic_policy", "external"}, {"ip_family", services::familyWord(fam)}});
    s.failures = &f.syncFailures.Add(l);
    s.conntrackDeleted = &f.conntrackDeleted.Add(l);
    f.cleanupFailures.Add(l);  // we delete stale chains in the sync's own transaction: stays 0
    mask |= 1u << i;
    f.served.store(mask, std::memory_order_release);
  }
}

void ProxyMetrics::queued(sync::WallTime t) {
  f_->lastQueuedAt = seconds(t);
  f_->eachServed([&](FamilySeries& s) { s.lastQueued->Set(seconds(t)); });
}

void ProxyMetrics::synced(const sync::SyncReport& r) {
  serve(servedSource_ ? servedSource_() : std::set<nft::Family>{nft::Family::IPv4, nft::Family::IPv6});
  const double d = std::chrono::duration<double>(r.duration).count();
  // One transaction programs every served family: each family's series sees the same sync.
  f_->eachServed([&](FamilySeries& s) {
    s.sync->Observe(d);
    (r.stats.full ? s.syncFull : s.syncPartial)->Observe(d);
  });
  if (r.stats.ops > 0) {
    f_->opsH->Observe(static_cast<double>(r.stats.ops));
    if (r.stats.bytes > 0) f_->bytesH->Observe(static_cast<double>(r.stats.bytes));
    f_->commitH->Observe(r.stats.commitMs / 1000.0);
  }
  f_->reconcile.Add({{"plan", planName(r.stats.plan)}, {"result", r.stats.ok ? "committed" : "failed"}}).Increment();
  // Upstream counts each failed main transaction; one refused as a whole and then committed
  // without the services the kernel refuses is one too.
  if (!r.stats.ok || r.stats.transactionRejected) f_->eachServed([](FamilySeries& s) { s.failures->Increment(); });
  if (!r.stats.ok) return;
  f_->rejectedG->Set(static_cast<double>(r.stats.rejectedServices));
  if (r.stats.servicesRefusedNow > 0) f_->rejectionsC->Increment(static_cast<double>(r.stats.servicesRefusedNow));
  f_->eachServed([&](FamilySeries& s) { s.last->Set(seconds(r.finished)); });
  for (const auto& [svc, t] : r.triggerTimes) {
    double latency = std::chrono::duration<double>(r.finished - t).count();
    if (latency < 0) continue;  // clock skew between the node and the control plane
    f_->eachServed([&](FamilySeries& s) { s.programming->Observe(latency); });
  }
}

void ProxyMetrics::countHealthz(int code) { f_->healthz.Add({{"code", std::to_string(code)}}).Increment(); }
void ProxyMetrics::countLivez(int code) { f_->livez.Add({{"code", std::to_string(code)}}).Increment(); }

void ProxyMetrics::setChangeCounts(const ChangeCounts& c) {
  f_->endpointPendingG->Set(static_cast<double>(c.endpointPending));
  f_->servicePendingG->Set(static_cast<double>(c.servicePending));
  std::lock_guard<std::mutex> g(f_->countersMu);
  if (c.endpointTotal > f_->endpointSeen) f_->endpointTotalC->Increment(static_cast<double>(c.endpointTotal - f_->endpointSeen));
  if (c.serviceTotal > f_->serviceSeen) f_->serviceTotalC->Increment(static_cast<double>(c.serviceTotal - f_->serviceSeen));
  f_->endpointSeen = std::max(f_->endpointSeen, c.endpointTotal);
  f_->serviceSeen = std::max(f_->serviceSeen, c.serviceTotal);
}

void ProxyMetrics::setNoLocalEndpoints(const NoLocalEndpoints& n) {
  unsigned mask = f_->served.load(std::memory_order_acquire);
  if (mask & 1u) {
    f_->family[0].noLocalInternal->Set(static_cast<double>(n.internalV4));
    f_->family[0].noLocalExternal->Set(static_cast<double>(n.externalV4));
  }
  if (mask & 2u) {
    f_->family[1].noLocalInternal->Set(static_cast<double>(n.internalV6));
    f_->family[1].noLocalExternal->Set(static_cast<double>(n.externalV6));
  }
}

void ProxyMetrics::countSkipped(const std::string& kind, const std::string& reason) {
  f_->skipped.Add({{"kind", kind}, {"reason", reason}}).Increment();
}

void ProxyMetrics::countEventDropped(const std::string& reason) { f_->eventsDropped.Add({{"reason", reason}}).Increment(); }

void ProxyMetrics::observeRestRequest(const std::string& method, const std::string& host, int code, double secs) {
  // client-go labels a request that got no HTTP answer (connection refused, TLS...) "<error>".
  std::string codeText = code > 0 ? std::to_string(code) : "<error>";
  f_->restRequests.Add({{"code", codeText}, {"host", host}, {"method", method}}).Increment();
  f_->restDuration.Add({{"host", host}, {"verb", method}}, kRestBuckets).Observe(secs);
}

void ProxyMetrics::observeConntrackReconcile(const std::string& family, double secs, size_t deleted) {
  const size_t i = family == services::familyWord(nft::Family::IPv6) ? 1 : 0;
  if (!(f_->served.load(std::memory_order_acquire) & (1u << i))) return;
  f_->family[i].conntrack->Observe(secs);
  if (deleted > 0) f_->family[i].conntrackDeleted->Increment(static_cast<double>(deleted));
}

std::string ProxyMetrics::scrape() const {
  auto families = registry_->Collect();
  auto process = collectProcessMetrics();
  families.insert(families.end(), process.begin(), process.end());
  for (const ScrapeSource& source : scrapeSources_) source(families);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace kpn::metrics
