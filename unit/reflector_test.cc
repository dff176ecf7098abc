// The reflector against a scripted API server: list -> watch -> events, resume from the last
// resourceVersion, 410 -> consistent relist with synthesised deletes, malformed events -> relist,
// 401 -> credentials re-read. And the API source applying deltas to the ClusterState.
#include <doctest/doctest.h>
#include <poll.h>

#include <chrono>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "pkg/kube/reflector.h"
#include "pkg/source/api_source.h"

namespace kpn::kube {
namespace {

struct Step {
  std::string expect;  // a substring the request target must contain
  HttpResult result;
  std::vector<std::string> chunks;  // stream(): body pieces, delivered one onData call each
};

class ScriptedTransport : public Transport {
 public:
  std::deque<Step> steps;
  std::vector<std::string> targets;
  int rejected = 0;

  HttpResult get(const std::string& target) override { return next(target).result; }
  HttpResult stream(const std::string& target, const std::function<bool(std::string_view)>& onData) override {
    Step s = next(target);
    for (const auto& c : s.chunks)
      if (!onData(c)) break;
    return s.result;
  }
  void credentialsRejected() override { rejected++; }
  void cancel() override {}
  HttpResult send(const std::string&, const std::string& target, const std::string&, const std::string&) override {
    return next(target).result;
  }
  std::string server() const override { return "https://scripted"; }

 private:
  Step next(const std::string& target) {
    targets.push_back(target);
    if (steps.empty()) {
      Step end;
      end.result.cancelled = true;
      return end;
    }
    Step s = steps.front();
    steps.pop_front();
    INFO("request " << target << " expected to contain " << s.expect);
    CHECK(target.find(s.expect) != std::string::npos);
    return s;
  }
};

HttpResult ok(std::string body = "") {
  HttpResult r;
  r.status = 200;
  r.body = std::move(body);
  return r;
}

std::string svcJson(const std::string& name, const std::string& rv, const std::string& ip) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"default","resourceVersion":")" + rv +
         R"("},"spec":{"clusterIP":")" + ip + R"(","ports":[{"port":80}]}})";
}

std::string svcList(const std::string& rv, const std::vector<std::string>& items, const std::string& cont = "") {
  std::string s = R"({"kind":"ServiceList","metadata":{"resourceVersion":")" + rv + R"(")" +
                  (cont.empty() ? "" : R"(,"continue":")" + cont + R"(")") + R"(},"items":[)";
  for (size_t i = 0; i < items.size(); i++) s += (i ? "," : "") + items[i];
  return s + "]}";
}

std::string event(const std::string& type, const std::string& obj) {
  return R"({"type":")" + type + R"(","object":)" + obj + "}\n";
}

struct Recorder {
  std::vector<std::pair<std::vector<Delta>, bool>> batches;
  Reflector::Sink sink() {
    return [this](std::vector<Delta>&& d, bool listed) { batches.emplace_back(std::move(d), listed); };
  }
  std::vector<std::string> summary() const {  // "+default/a", "-default/b", "|" after a list batch
    std::vector<std::string> out;
    for (const auto& [ds, listed] : batches) {
      for (const auto& d : ds) out.push_back((d.deleted ? "-" : "+") + d.key);
      if (listed) out.push_back("|");
    }
    return out;
  }
};

ResourceSpec servicesSpec() { return {"Service", "/api/v1/services", "!service.kubernetes.io/headless", ""}; }

TEST_CASE("reflector: first list from the watch cache, then watch from its resourceVersion with bookmarks") {
  ScriptedTransport t;
  t.steps.push_back({"resourceVersion=0", ok(svcList("100", {svcJson("a", "90", "10.96.0.1")})), {}});
  t.steps.push_back({"watch=true&allowWatchBookmarks=true&resourceVersion=100", ok(),
                     {event("ADDED", svcJson("b", "101", "10.96.0.2")).substr(0, 30),
                      event("ADDED", svcJson("b", "101", "10.96.0.2")).substr(30) +
                          R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"150"}}})" "\n"}});
  Recorder rec;
  Reflector r(t, servicesSpec(), rec.sink());
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  CHECK(r.listedOnce());
  CHECK(t.targets[0].find("labelSelector=%21service.kubernetes.io%2Fheadless") != std::string::npos);
  CHECK(t.targets[0].find("limit=500") != std::string::npos);
  REQUIRE(r.watch() == Reflector::Outcome::Ok);
  CHECK(rec.summary() == std::vector<std::string>{"+default/a", "|", "+default/b"});
  CHECK(r.resourceVersion() == "150");  // the bookmark moved it
  auto& w = t.targets[1];
  auto ts = std::stoi(w.substr(w.find("timeoutSeconds=") + 15));
  CHECK(ts >= 300);
  CHECK(ts < 600);
}

TEST_CASE("reflector: a paged list follows continue tokens and delivers one consistent batch") {
  ScriptedTransport t;
  t.steps.push_back({"resourceVersion=0", ok(svcList("100", {svcJson("a", "1", "10.96.0.1")}, "tok 1")), {}});
  t.steps.push_back({"continue=tok%201", ok(svcList("100", {svcJson("b", "2", "10.96.0.2")})), {}});
  Recorder rec;
  Reflector r(t, servicesSpec(), rec.sink());
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  CHECK(t.targets[1].find("resourceVersion=") == std::string::npos);  // continue carries the snapshot
  CHECK(rec.summary() == std::vector<std::string>{"+default/a", "+default/b", "|"});
  CHECK(r.resourceVersion() == "100");
}

TEST_CASE("reflector: 410 on the watch -> consistent relist; unchanged objects are not re-sent, vanished ones deleted") {
  ScriptedTransport t;
  t.steps.push_back({"resourceVersion=0", ok(svcList("100", {svcJson("a", "1", "10.96.0.1"), svcJson("b", "2", "10.96.0.2"),
                                                             svcJson("c", "3", "10.96.0.3")})), {}});
  t.steps.push_back({"resourceVersion=100", ok(),
                     {R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})" "\n"}});
  // The relist: a unchanged, b modified, c gone, d new.
  t.steps.push_back({"limit=500", ok(svcList("200", {svcJson("a", "1", "10.96.0.1"), svcJson("b", "150", "10.96.0.22"),
                                                     svcJson("d", "160", "10.96.0.4")})), {}});
  Recorder rec;
  Reflector r(t, servicesSpec(), rec.sink());
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  REQUIRE(r.watch() == Reflector::Outcome::Gone);
  // run() would now relist consistently; do what it does.
  t.steps.front().expect = "limit=500";
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  CHECK(rec.summary() ==
        std::vector<std::string>{"+default/a", "+default/b", "+default/c", "|", "+default/b", "+default/d", "-default/c", "|"});
  CHECK(r.resourceVersion() == "200");
}

TEST_CASE("reflector: run() relists after 410 without resourceVersion=0, resumes watches from the last RV") {
  ScriptedTransport t;
  t.steps.push_back({"resourceVersion=0", ok(svcList("10", {})), {}});
  t.steps.push_back({"resourceVersion=10", ok(), {event("ADDED", svcJson("a", "11", "10.96.0.1"))}});  // clean end
  t.steps.push_back({"resourceVersion=11", ok(), {event("DELETED", svcJson("a", "12", "10.96.0.1"))}});
  HttpResult gone;
  gone.status = 410;
  t.steps.push_back({"resourceVersion=12", gone, {}});
  t.steps.push_back({"limit=500", ok(svcList("20", {svcJson("z", "19", "10.96.0.9")})), {}});
  t.steps.push_back({"resourceVersion=20", ok(), {}});  // then the script ends: cancelled -> run() returns
  Recorder rec;
  ReflectorOptions o;
  o.minHealthyWatch = std::chrono::milliseconds(0);
  Reflector r(t, servicesSpec(), rec.sink(), o);
  r.run();
  REQUIRE(t.targets.size() == 7);
  CHECK(t.targets[4].find("resourceVersion=") == std::string::npos);  // consistent read after 410
  CHECK(rec.summary() == std::vector<std::string>{"|", "+default/a", "-default/a", "+default/z", "|"});
  CHECK(r.stats().relistsAfterGone == 1);
}

TEST_CASE("reflector: a malformed event ends the watch and forces a relist; an invalid object is skipped, not deleted") {
  ScriptedTransport t;
  t.steps.push_back({"resourceVersion=0", ok(svcList("10", {svcJson("a", "5", "10.96.0.1")})), {}});
  t.steps.push_back({"resourceVersion=10", ok(),
                     {event("MODIFIED", svcJson("a", "11", "not-an-ip")) + "{\"type\":\"ADDED\",\"obj\n" +
                      event("ADDED", svcJson("never", "13", "10.96.0.3"))}});
  Recorder rec;
  Reflector r(t, servicesSpec(), rec.sink());
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  CHECK(r.watch() == Reflector::Outcome::Failed);
  CHECK(r.stats().malformedEvents == 1);
  CHECK(r.stats().skippedObjects == 1);
  // Nothing after the malformed line was taken, and "a" was neither replaced nor deleted.
  CHECK(rec.summary() == std::vector<std::string>{"+default/a", "|"});
  CHECK(r.resourceVersion() == "11");
}

TEST_CASE("reflector: 401 asks the transport to re-read credentials; 5xx and transport errors fail softly") {
  ScriptedTransport t;
  HttpResult unauth;
  unauth.status = 401;
  HttpResult busy;
  busy.status = 429;
  busy.retryAfterSeconds = 2;
  HttpResult down;
  down.error = "Connection refused";
  t.steps.push_back({"services", unauth, {}});
  t.steps.push_back({"services", busy, {}});
  t.steps.push_back({"services", down, {}});
  t.steps.push_back({"services", ok("{not json"), {}});
  Recorder rec;
  Reflector r(t, servicesSpec(), rec.sink());
  CHECK(r.list() == Reflector::Outcome::Unauthorized);
  CHECK(t.rejected == 1);
  CHECK(r.list() == Reflector::Outcome::Failed);
  CHECK(r.list() == Reflector::Outcome::Failed);
  CHECK(r.list() == Reflector::Outcome::Failed);
  CHECK_FALSE(r.listedOnce());
  CHECK(rec.batches.empty());
}

TEST_CASE("reflector: a watch the server closes at once with nothing counts as a failure (no busy loop)") {
  ScriptedTransport t;
  t.steps.push_back({"resourceVersion=0", ok(svcList("10", {})), {}});
  t.steps.push_back({"watch=true", ok(), {}});
  Recorder rec;
  Reflector r(t, servicesSpec(), rec.sink());
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  CHECK(r.watch() == Reflector::Outcome::Failed);
}

TEST_CASE("reflector: an optional resource the server does not serve (404) is an empty, complete list") {
  ScriptedTransport t;
  HttpResult notFound;
  notFound.status = 404;
  const std::string cidr =
      R"({"metadata":{"name":"kubernetes","resourceVersion":"7"},"spec":{"cidrs":["10.96.0.0/16"]}})";
  t.steps.push_back({"servicecidrs", ok(R"({"metadata":{"resourceVersion":"9"},"items":[)" + cidr + "]}"), {}});
  t.steps.push_back({"watch=true", notFound, {}});  // the API went away
  t.steps.push_back({"servicecidrs", notFound, {}});
  Recorder rec;
  ResourceSpec spec{"ServiceCIDR", "/apis/networking.k8s.io/v1/servicecidrs", "", "", true};
  Reflector r(t, spec, rec.sink());
  REQUIRE(r.list() == Reflector::Outcome::Ok);
  CHECK(r.watch() == Reflector::Outcome::Failed);
  CHECK(r.list() == Reflector::Outcome::NotServed);
  CHECK(rec.summary() == std::vector<std::string>{"+kubernetes", "|", "-kubernetes", "|"});
  CHECK(r.stats().errors == 0);
  // A required resource answering 404 is an error, not an empty list.
  ScriptedTransport t2;
  t2.steps.push_back({"nodes", notFound, {}});
  Recorder rec2;
  Reflector nodes(t2, {"Node", "/api/v1/nodes", "", "", false}, rec2.sink());
  CHECK(nodes.list() == Reflector::Outcome::Failed);
  CHECK_FALSE(nodes.listedOnce());
}

// A transport whose streams block until cancel(), so that ApiSource's threads list and then wait.
class ListOnlyTransport : public Transport {
 public:
  std::map<std::string, std::string> lists;  // path prefix -> list body
  HttpResult get(const std::string& target) override {
    for (const auto& [prefix, body] : lists)
      if (target.rfind(prefix, 0) == 0) return ok(body);
    HttpResult r;
    r.status = 404;
    return r;
  }
  HttpResult stream(const std::string&, const std::function<bool(std::string_view)>&) override {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return cancelled_; });
    HttpResult r;
    r.cancelled = true;
    return r;
  }
  void credentialsRejected() override {}
  void cancel() override {
    std::lock_guard<std::mutex> lk(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  HttpResult send(const std::string&, const std::string&, const std::string&, const std::string&) override {
    HttpResult r;
    r.status = 405;
    return r;
  }
  std::string server() const override { return "https://list-only"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

std::string sliceJson(const std::string& name, const std::string& service, const std::string& triggerTime) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"default","resourceVersion":"3",)"
         R"("labels":{"kubernetes.io/service-name":")" + service +
         R"("},"annotations":{"endpoints.kubernetes.io/last-change-trigger-time":")" + triggerTime + R"("}},)"
         R"("addressType":"IPv4","endpoints":[{"addresses":["10.1.0.5"]}],"ports":[{"port":8080}]})";
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&secs));
  return buf;
}

// Defect 7 of issue 11: upstream's first sync waits for Services and EndpointSlices only. Issue
// 23: as upstream's change tracker, trigger times from before the source started are not kept.
TEST_CASE("API source: synced once Services and EndpointSlices listed, the Node still missing; deltas land with "
          "trigger times from after the start") {
  auto transport = std::make_unique<ListOnlyTransport>();
  transport->lists["/api/v1/services?"] =
      svcList("5", {svcJson("web", "4", "10.96.0.10"), svcJson("old", "4", "10.96.0.11")});
  const auto now = std::chrono::system_clock::now();
  transport->lists["/apis/discovery.k8s.io/v1/endpointslices?"] =
      R"({"metadata":{"resourceVersion":"5"},"items":[)" + sliceJson("web-1", "web", rfc3339(now + std::chrono::hours(1))) +
      "," + sliceJson("old-1", "old", rfc3339(now - std::chrono::hours(1))) + "]}";
  state::ClusterState st;
  {
    source::ApiSource src(std::move(transport), "node-a", st);
    CHECK_FALSE(src.hasSynced());
    src.start();
    // The node list answers 404 in this script (as a 403 would: it fails and is retried); the
    // source is synced anyway. Both lists arrive on their own threads, in either order.
    // ServiceCIDRs answer 404 here: optional, so they count as listed (empty) once processed.
    for (int i = 0; i < 100 && (st.services.empty() || st.slicesByService.empty() || src.pending() != "Nodes");
         i++) {
      pollfd p{src.fd(), POLLIN, 0};
      poll(&p, 1, 20);
      src.processEvents();
    }
    CHECK(st.services.count("default/web") == 1);
    CHECK(st.slicesByService.at("default/web").count("web-1") == 1);
    // The Node gets a short grace (a restart should not sync without it), never more.
    for (int i = 0; i < 250 && !src.hasSynced(); i++) {
      pollfd p{src.fd(), POLLIN, 0};
      poll(&p, 1, 20);
      src.processEvents();
    }
    CHECK(src.hasSynced());
    CHECK(src.pending() == "Nodes");
    auto trig = src.takeTriggerTimes();
    REQUIRE(trig.count("default/web") == 1);
    CHECK(trig.count("default/old") == 0);  // its last change was before the start
    CHECK(src.takeTriggerTimes().empty());
  }  // the destructor stops the reflectors (one is backing off, two are watching)
}

TEST_CASE("API source: not synced while EndpointSlices have not listed, whatever else has") {
  auto transport = std::make_unique<ListOnlyTransport>();
  transport->lists["/api/v1/services?"] = svcList("5", {svcJson("web", "4", "10.96.0.10")});
  transport->lists["/api/v1/nodes?"] = R"({"metadata":{"resourceVersion":"5"},"items":[]})";
  state::ClusterState st;
  source::ApiSource src(std::move(transport), "node-a", st);
  src.start();
  for (int i = 0; i < 100 && src.pending() != "EndpointSlices"; i++) {
    pollfd p{src.fd(), POLLIN, 0};
    poll(&p, 1, 20);
    src.processEvents();
  }
  CHECK(src.pending() == "EndpointSlices");
  CHECK(st.services.count("default/web") == 1);
  CHECK_FALSE(src.hasSynced());
}

}  // namespace
}  // namespace kpn::kube
