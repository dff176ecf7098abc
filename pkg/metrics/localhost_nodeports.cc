#include "pkg/metrics/localhost_nodeports.h"

#include <glog/logging.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cctype>

#include "nft/kernel/counter_objects.h"
#include "pkg/api/types.h"
#include "pkg/services/family.h"
#include "pkg/services/localhost_reject_counters.h"

namespace kpn::metrics {

namespace {

size_t index(nft::Family f) { return f == nft::Family::IPv6 ? 1 : 0; }
nft::Family familyAt(size_t i) { return i == 1 ? nft::Family::IPv6 : nft::Family::IPv4; }
// Upstream's label value: the API's spelling of the protocol.
std::string protocolLabel(api::Protocol p) {
  std::string s = api::protocolName(p);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

struct LocalhostNodePortMetrics::Series {
  Series(prometheus::Registry& r, std::string t)
      : table(std::move(t)),
        listeners(prometheus::BuildGauge()
                      .Name("kubeproxy_nftables_localhost_nodeport_listeners")
                      .Help("Number of localhost NodePort listeners")
                      .Register(r)),
        failures(prometheus::BuildCounter()
                     .Name("kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total")
                     .Help("Cumulative number of localhost NodePort listeners that could not be created")
                     .Register(r)) {}

  // The rejected-packets family from the table's counters, for the served families: runs on the
  // scraping thread, so it only reads `served` and the kernel.
  void collectRejected(std::vector<prometheus::MetricFamily>& out) const {
    prometheus::MetricFamily fam;
    fam.name = "kubeproxy_nftables_localhost_nodeport_rejected_packets_total";
    fam.help = "Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected";
    fam.type = prometheus::MetricType::Counter;
    const unsigned mask = served.load(std::memory_order_acquire);
    for (size_t i = 0; i < 2; ++i) {
      if (!(mask & (1u << i))) continue;
      std::string error;
      auto packets = nft::readCounterPackets(familyAt(i), table, &error);
      if (!packets) {
        LOG_EVERY_N(WARNING, 100) << "reading the localhost NodePort counters (" << services::familyWord(familyAt(i))
                                  << "): " << error;
        continue;
      }
      for (api::Protocol p : services::localhostRejectedProtocols()) {
        auto c = packets->find(services::localhostRejectCounter(p));
        if (c == packets->end()) continue;  // not declared (yet): no series, as upstream
        prometheus::ClientMetric m;
        m.label = {{"ip_family", services::familyWord(familyAt(i))}, {"protocol", protocolLabel(p)}};
        m.counter.value = static_cast<double>(c->second);
        fam.metric.push_back(std::move(m));
      }
    }
    if (!fam.metric.empty()) out.push_back(std::move(fam));
  }

  std::string table;
  prometheus::Family<prometheus::Gauge>& listeners;
  prometheus::Family<prometheus::Counter>& failures;
  std::array<prometheus::Gauge*, 2> listenersOf{};
  std::array<prometheus::Counter*, 2> failuresOf{};
  std::atomic<unsigned> served{0};  // bit i: family i, set after its series exist
};

LocalhostNodePortMetrics::LocalhostNodePortMetrics(ProxyMetrics& metrics, std::string table)
    : s_(std::make_unique<Series>(metrics.registry(), std::move(table))) {
  metrics.addScrapeSource([s = s_.get()](std::vector<prometheus::MetricFamily>& out) { s->collectRejected(out); });
}

LocalhostNodePortMetrics::~LocalhostNodePortMetrics() = default;

void LocalhostNodePortMetrics::serve(nft::Family f) {
  const size_t i = index(f);
  if (s_->listenersOf[i]) return;
  const prometheus::Labels l{{"ip_family", services::familyWord(familyAt(i))}};
  s_->listenersOf[i] = &s_->listeners.Add(l);
  s_->failuresOf[i] = &s_->failures.Add(l);
  s_->served.fetch_or(1u << i, std::memory_order_release);
}

void LocalhostNodePortMetrics::setListeners(nft::Family f, size_t n) {
  serve(f);
  s_->listenersOf[index(f)]->Set(static_cast<double>(n));
}

void LocalhostNodePortMetrics::countCreationFailures(nft::Family f, size_t n) {
  serve(f);
  if (n) s_->failuresOf[index(f)]->Increment(static_cast<double>(n));
}

}  // namespace kpn::metrics
