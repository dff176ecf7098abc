// Kubernetes Events (pkg/events): the bodies as upstream's client-go writes them, and the recorder
// against a scripted API server: series, rate limits, retries, drops, never blocking record().
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "pkg/events/event.h"
#include "pkg/events/recorder.h"
#include "pkg/events/service_events.h"

using namespace kpn;
using namespace kpn::events;
using namespace std::chrono_literals;

namespace {

rapidjson::Document parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

// Answers each request with the next scripted status (201/200 when the script is empty), and
// records what it was asked.
class ScriptedApi : public kube::Transport {
 public:
  struct Call {
    std::string method, target, body, contentType;
  };
  std::deque<int> statuses;
  std::chrono::milliseconds delay{0};

  kube::HttpResult get(const std::string&) override { return {}; }
  kube::HttpResult stream(const std::string&, const std::function<bool(std::string_view)>&) override { return {}; }
  kube::HttpResult send(const std::string& method, const std::string& target, const std::string& body,
                        const std::string& contentType) override {
    if (delay.count()) std::this_thread::sleep_for(delay);
    std::lock_guard<std::mutex> lk(mu);
    calls.push_back({method, target, body, contentType});
    kube::HttpResult r;
    if (!statuses.empty()) {
      r.status = statuses.front();
      statuses.pop_front();
    } else {
      r.status = method == "POST" ? 201 : 200;
    }
    cv.notify_all();
    return r;
  }
  void credentialsRejected() override {}
  void cancel() override {}
  std::string server() const override { return "https://scripted"; }

  std::vector<Call> snapshot() {
    std::lock_guard<std::mutex> lk(mu);
    return calls;
  }
  bool waitCalls(size_t n, std::chrono::milliseconds limit = 5s) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, limit, [&] { return calls.size() >= n; });
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Call> calls;
};

RecorderOptions fast() {
  RecorderOptions o;
  o.retryDelay = 10ms;
  o.qps = 0;  // no client-side rate in these tests
  return o;
}

}  // namespace

TEST_CASE("events: the Starting event on the Node, as upstream's recorder writes it") {
  Reporter by = reporterFor("node-a.example");
  CHECK(by.controller == "kube-proxy");
  CHECK(by.instance == "kube-proxy-node-a.example");
  Event e = startingEvent("node-a");
  auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1733380000) + std::chrono::microseconds(123456));
  std::string name = eventName(e.regarding, t);
  CHECK(name == "node-a.180e33ed20200a00");  // <name>.<nanoseconds in hex>
  auto d = parse(createBody(e, by, name, t));
  CHECK(std::string(d["apiVersion"].GetString()) == "events.k8s.io/v1");
  CHECK(std::string(d["metadata"]["namespace"].GetString()) == "default");  // a Node: cluster-scoped
  CHECK(std::string(d["eventTime"].GetString()) == "2024-12-05T06:26:40.123456Z");
  CHECK(std::string(d["reason"].GetString()) == "Starting");
  CHECK(std::string(d["action"].GetString()) == "StartKubeProxy");
  CHECK(std::string(d["type"].GetString()) == "Normal");
  CHECK(std::string(d["note"].GetString()).empty());
  CHECK(std::string(d["regarding"]["kind"].GetString()) == "Node");
  CHECK(std::string(d["regarding"]["uid"].GetString()) == "node-a");
  CHECK_FALSE(d["regarding"].HasMember("namespace"));
  CHECK_FALSE(d.HasMember("series"));
  CHECK(eventsPath("default") == "/apis/events.k8s.io/v1/namespaces/default/events");
}

TEST_CASE("events: a Service's events live in its namespace; notes are cut to the API server's 1024 bytes") {
  Event e = serviceRefusedEvent("node-a", "shop/cart", std::string(2000, 'x') + "\xc3\xa9");
  CHECK(eventNamespace(e.regarding) == "shop");
  CHECK(e.type == "Warning");
  CHECK(e.reason == "FailedToProgramService");
  auto d = parse(createBody(e, reporterFor("h"), "cart.1", std::chrono::system_clock::now(), 3,
                            std::chrono::system_clock::now()));
  CHECK(std::string(d["note"].GetString()).size() <= 1024);
  CHECK(d["series"]["count"].GetInt() == 3);
  CHECK(std::string(d["regarding"]["apiVersion"].GetString()) == "v1");
  // Never cut inside a UTF-8 character.
  std::string cut = clip(std::string(1020, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9", 1024);
  CHECK(cut.size() <= 1024);
  CHECK(cut.substr(cut.size() - 3) == "...");
  CHECK((static_cast<unsigned char>(cut[cut.size() - 4]) & 0xC0) != 0xC0);
  CHECK(serverFailedEvent("n", "healthz", "x").reason == "FailedToStartProxierHealthcheck");
  CHECK(serverFailedEvent("n", "metrics", "x").reason == "FailedToStartMetricServer");
  CHECK(healthCheckFailedEvent("n", "ns", "svc", 32000, "in use").note ==
        "node n failed to start healthcheck \"ns/svc\" on port 32000: in use");
}

TEST_CASE("recorder: a repeated event is one series: its second occurrence PATCHes the count, later ones wait for its end") {
  ScriptedApi api;
  RecorderOptions o = fast();
  o.seriesFinish = 300ms;
  Recorder rec(api, reporterFor("h"), o);
  Event e = serviceRefusedEvent("node-a", "default/bad", "EPERM");
  rec.record(e);
  REQUIRE(api.waitCalls(1));
  rec.record(e);
  REQUIRE(api.waitCalls(2));
  auto calls = api.snapshot();
  CHECK(calls[0].method == "POST");
  CHECK(calls[0].target == "/apis/events.k8s.io/v1/namespaces/default/events");
  auto name = std::string(parse(calls[0].body)["metadata"]["name"].GetString());
  CHECK(calls[1].method == "PATCH");
  CHECK(calls[1].target == calls[0].target + "/" + name);
  CHECK(calls[1].contentType == kStrategicMergePatch);
  CHECK(parse(calls[1].body)["series"]["count"].GetInt() == 2);
  // The third and fourth are counted, and written when the series ends.
  rec.record(e);
  rec.record(e);
  REQUIRE(rec.flush(2s));
  CHECK(api.snapshot().size() == 2);
  REQUIRE(api.waitCalls(3, 3s));
  REQUIRE(rec.flush(2s));
  calls = api.snapshot();
  CHECK(calls[2].method == "PATCH");
  CHECK(parse(calls[2].body)["series"]["count"].GetInt() == 4);
  CHECK(rec.counts().created == 1);
  CHECK(rec.counts().patched == 2);
  // After the series ended, the same event starts a new one.
  rec.record(e);
  REQUIRE(api.waitCalls(4));
  CHECK(api.snapshot()[3].method == "POST");
}

TEST_CASE("recorder: a series whose event is gone is created again with its count") {
  ScriptedApi api;
  api.statuses = {201, 404};
  Recorder rec(api, reporterFor("h"), fast());
  Event e = startingEvent("n");
  rec.record(e);
  rec.record(e);
  REQUIRE(api.waitCalls(3));
  auto calls = api.snapshot();
  CHECK(calls[1].method == "PATCH");
  CHECK(calls[2].method == "POST");
  CHECK(parse(calls[2].body)["series"]["count"].GetInt() == 2);
}

TEST_CASE("recorder: an API server that does not answer is tried three times, then the event is dropped and counted") {
  ScriptedApi api;
  api.statuses = {0, 503, 503, 201};
  std::vector<std::string> drops;
  std::mutex mu;
  Recorder rec(api, reporterFor("h"), fast(), [&](const char* why) {
    std::lock_guard<std::mutex> lk(mu);
    drops.push_back(why);
  });
  rec.record(startingEvent("n"));
  REQUIRE(rec.flush(2s));
  CHECK(api.snapshot().size() == 3);
  CHECK(rec.counts().dropped == 1);
  CHECK(drops == std::vector<std::string>{kDropApiUnavailable});
  // A refusal (4xx other than 404/409) is not retried.
  api.statuses = {422};
  rec.record(serviceProgrammedEvent("n", "a/b"));
  REQUIRE(rec.flush(2s));
  CHECK(api.snapshot().size() == 4);  // one try
  CHECK(drops.back() == kDropRejected);
}

TEST_CASE("recorder: record() never waits for the API server; a full queue drops and counts") {
  ScriptedApi api;
  api.delay = 200ms;
  RecorderOptions o = fast();
  o.queueCapacity = 2;
  std::atomic<int> full{0};
  Recorder rec(api, reporterFor("h"), o, [&](const char* why) {
    if (std::string(why) == kDropQueueFull) ++full;
  });
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) rec.record(serviceRefusedEvent("n", "ns/s" + std::to_string(i), "x"));
  CHECK(std::chrono::steady_clock::now() - t0 < 100ms);
  CHECK(full.load() >= 7);  // one in flight, two queued
}

TEST_CASE("recorder: one object gets 25 events, then one per refill period (upstream's spam filter)") {
  ScriptedApi api;
  RecorderOptions o = fast();
  o.perObjectBurst = 3;
  std::atomic<int> limited{0};
  Recorder rec(api, reporterFor("h"), o, [&](const char* why) {
    if (std::string(why) == kDropRateLimited) ++limited;
  });
  // Distinct events (other reasons) about one Service.
  for (const char* reason : {"A", "B", "C", "D", "E"}) {
    Event e = serviceProgrammedEvent("n", "ns/one");
    e.reason = reason;
    rec.record(e);
  }
  rec.record(serviceProgrammedEvent("n", "ns/other"));
  REQUIRE(rec.flush(2s));
  CHECK(rec.counts().created == 4);
  CHECK(limited.load() == 2);
}

TEST_CASE("service events: the syncer's refusals and recoveries become Warning and Normal events on the Service") {
  ScriptedApi api;
  Recorder rec(api, reporterFor("h"), fast());
  ServiceEvents ev(rec, "node-a");
  sync::SyncerListener& l = ev;
  l.serviceRefused("shop/cart", "Operation not permitted");
  l.serviceProgrammedAgain("shop/cart");
  l.syncFailed("ignored: not about a Service");
  REQUIRE(rec.flush(2s));
  auto calls = api.snapshot();
  REQUIRE(calls.size() == 2);
  auto warn = parse(calls[0].body), ok = parse(calls[1].body);
  CHECK(std::string(warn["type"].GetString()) == "Warning");
  CHECK(std::string(warn["note"].GetString()).find("(Operation not permitted)") != std::string::npos);
  CHECK(std::string(warn["regarding"]["name"].GetString()) == "cart");
  CHECK(calls[0].target == "/apis/events.k8s.io/v1/namespaces/shop/events");
  CHECK(std::string(ok["reason"].GetString()) == "ServiceProgrammed");
}
