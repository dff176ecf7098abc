// Behaviour of topology-aware routing (EndpointSlice hints, as the EndpointSlice controller writes
// them for trafficDistribution), asked of the packet evaluator: which endpoints answer from this
// node, in zone-a. No table object is named.
#include <doctest/doctest.h>

#include "unit/behaviour.h"
#include "unit/fixtures.h"

using namespace kpn;
using namespace kpn::testing;

namespace {

struct Hinted {
  std::string ip, node;
  std::vector<std::string> zones, nodes;
  bool ready = true;
};

void setZone(World& w, const std::string& zone) {
  auto node = std::make_shared<api::Node>(*w.st.node);
  if (zone.empty()) node->meta.labels.erase("topology.kubernetes.io/zone");
  else node->meta.labels["topology.kubernetes.io/zone"] = zone;
  w.st.setNode(node);
}

// ns/web 172.30.0.10:80 -> :8080 over the given endpoints; iTP/eTP as given; nodePort 30080.
void addWeb(World& w, const std::vector<Hinted>& eps, const std::string& etp = "Cluster") {
  api::ServicePort p = port("http", 80);
  p.nodePort = 30080;
  auto svc = service("ns", "web", {"172.30.0.10"}, {p});
  svc->type = "NodePort";
  svc->externalTrafficPolicy = etp;
  svc->trafficDistribution = "PreferClose";
  w.st.upsertService(svc);
  std::vector<Ep> plain;
  for (const auto& e : eps) plain.push_back({e.ip, e.ready, true, !e.ready, e.node});
  auto s = slice("ns", "web-4", "web", {epPort("http", 8080)}, plain);
  for (size_t i = 0; i < eps.size(); ++i) {
    s->endpoints[i].setHints(eps[i].zones, eps[i].nodes);
  }
  w.st.upsertSlice(s);
}

const std::vector<Hinted> kThreeZones = {
    {"10.0.1.7", "node-a", {"zone-a"}, {}},
    {"10.0.2.1", "node-b", {"zone-a"}, {}},
    {"10.0.3.1", "node-c", {"zone-b"}, {}},
    {"10.0.4.1", "node-d", {"zone-c"}, {}},
};

}  // namespace

TEST_CASE("behaviour: zone hints: only the endpoints hinted for this node's zone answer") {
  World w;
  setZone(w, "zone-a");
  addWeb(w, kThreeZones);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
  // NodePorts (eTP=Cluster) follow the same subset.
  CHECK(w.fromOutside(kNodeIP, 30080) == "10.0.1.7:8080 1/2 from 192.168.0.2; 10.0.2.1:8080 1/2 from 192.168.0.2");
  // A Node label change re-renders: zone-b's one endpoint.
  setZone(w, "zone-b");
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.3.1:8080 from 10.0.1.5");
}

TEST_CASE("behaviour: zone hints are ignored when one ready endpoint has none, when none is for our zone, or without a zone") {
  const std::string all = "10.0.1.7:8080 1/4 from 10.0.1.5; 10.0.2.1:8080 1/4 from 10.0.1.5; "
                          "10.0.3.1:8080 1/4 from 10.0.1.5; 10.0.4.1:8080 1/4 from 10.0.1.5";
  {
    World w;
    setZone(w, "zone-a");
    auto eps = kThreeZones;
    eps[3].zones.clear();
    addWeb(w, eps);
    CHECK(w.fromPod("172.30.0.10", 80) == all);
  }
  {
    World w;
    setZone(w, "zone-z");
    addWeb(w, kThreeZones);
    CHECK(w.fromPod("172.30.0.10", 80) == all);
  }
  {
    World w;  // no zone label
    addWeb(w, kThreeZones);
    CHECK(w.fromPod("172.30.0.10", 80) == all);
  }
  {
    World w;  // a not-ready endpoint without hints does not count
    setZone(w, "zone-a");
    auto eps = kThreeZones;
    eps.push_back({"10.0.5.1", "node-e", {}, {}, false});
    addWeb(w, eps);
    CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
  }
}

TEST_CASE("behaviour: node hints (PreferSameNode) win over zone hints; missing ones fall back to zones") {
  World w;
  setZone(w, "zone-a");
  std::vector<Hinted> eps = {
      {"10.0.1.7", "node-a", {"zone-a"}, {"node-a"}},
      {"10.0.2.1", "node-b", {"zone-a"}, {"node-b"}},
      {"10.0.3.1", "node-c", {"zone-b"}, {"node-c"}},
  };
  addWeb(w, eps);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 from 10.0.1.5");
  eps[2].nodes.clear();  // one without a node hint: zones decide
  addWeb(w, eps);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
  eps[0].nodes = {"node-x"};  // all node-hinted, none for us: zones again
  eps[2].nodes = {"node-c"};
  addWeb(w, eps);
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.1.7:8080 1/2 from 10.0.1.5; 10.0.2.1:8080 1/2 from 10.0.1.5");
}

TEST_CASE("behaviour: externalTrafficPolicy Local takes precedence over hints for outside traffic") {
  World w;
  setZone(w, "zone-b");
  addWeb(w, kThreeZones, "Local");
  // From outside: this node's endpoint (hinted for zone-a, we are in zone-b) all the same.
  CHECK(w.fromOutside(kNodeIP, 30080) == "10.0.1.7:8080 from 198.51.100.50");
  // The ClusterIP uses the cluster endpoints and so the hints: zone-b.
  CHECK(w.fromPod("172.30.0.10", 80) == "10.0.3.1:8080 from 10.0.1.5");
}

TEST_CASE("behaviour: topology does not apply to the terminating fallback") {
  World w;
  setZone(w, "zone-a");
  auto eps = kThreeZones;
  for (auto& e : eps) e.ready = false;
  addWeb(w, eps);
  CHECK(w.fromPod("172.30.0.10", 80) ==
        "10.0.1.7:8080 1/4 from 10.0.1.5; 10.0.2.1:8080 1/4 from 10.0.1.5; 10.0.3.1:8080 1/4 from 10.0.1.5; "
        "10.0.4.1:8080 1/4 from 10.0.1.5");
}
