// The list/watch wire format: lines split across arbitrary chunk boundaries, events and list
// pages decoded (good and malformed), RFC 3339 trigger times.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pkg/kube/line_splitter.h"
#include "pkg/kube/wire.h"
#include "pkg/source/api_source.h"

namespace kpn::kube {
namespace {

std::vector<std::string> splitAll(const std::vector<std::string>& chunks, size_t maxLine,
                                  std::vector<size_t>* oversize = nullptr) {
  LineSplitter s(maxLine);
  std::vector<std::string> lines;
  for (const auto& c : chunks)
    s.feed(
        c, [&](std::string_view l) { lines.emplace_back(l); return true; },
        [&](size_t n) { if (oversize) oversize->push_back(n); });
  return lines;
}

const char* kSvcEvent =
    R"({"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"web","namespace":"prod",)"
    R"("resourceVersion":"17","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{big}"}},)"
    R"("spec":{"clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10"],"ports":[{"port":80,"protocol":"TCP"}]}}})";

TEST_CASE("line splitter: events split at every possible chunk boundary come out whole") {
  std::string stream = std::string(kSvcEvent) + "\n" + R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"18"}}})" + "\r\n";
  for (size_t cut1 = 0; cut1 <= stream.size(); cut1 += 7)
    for (size_t cut2 = cut1; cut2 <= stream.size(); cut2 += 13) {
      auto lines = splitAll({stream.substr(0, cut1), stream.substr(cut1, cut2 - cut1), stream.substr(cut2)}, 1 << 20);
      REQUIRE(lines.size() == 2);
      CHECK(lines[0] == kSvcEvent);
      CHECK(lines[1].back() == '}');  // the \r is gone
    }
}

TEST_CASE("line splitter: many events in one chunk, empty lines skipped, unfinished line held") {
  LineSplitter s(100);
  std::vector<std::string> lines;
  s.feed("a\n\nb\nc", [&](std::string_view l) { lines.emplace_back(l); return true; }, [](size_t) {});
  CHECK(lines == std::vector<std::string>{"a", "b"});
  CHECK(s.pending() == 1);
  s.feed("d\n", [&](std::string_view l) { lines.emplace_back(l); return true; }, [](size_t) {});
  CHECK(lines.back() == "cd");
  CHECK(s.pending() == 0);
}

TEST_CASE("line splitter: an oversize line is dropped whole, memory stays bounded, the next line is fine") {
  std::vector<size_t> over;
  auto lines = splitAll({"ok\n", std::string(30, 'x'), std::string(30, 'y'), "z\nnext\n"}, 40, &over);
  CHECK(lines == std::vector<std::string>{"ok", "next"});
  REQUIRE(over.size() == 1);
  CHECK(over[0] == 61);
}

TEST_CASE("line splitter: the consumer can stop early") {
  LineSplitter s(100);
  int n = 0;
  CHECK_FALSE(s.feed("a\nb\nc\n", [&](std::string_view) { return ++n < 2; }, [](size_t) {}));
  CHECK(n == 2);
}

TEST_CASE("watch event: ADDED service decodes, keeps only useful annotations") {
  WatchEvent ev;
  REQUIRE_FALSE(decodeWatchEvent(kSvcEvent, "Service", ev));
  CHECK(ev.type == WatchEvent::Type::Added);
  CHECK(ev.item.key == "prod/web");
  CHECK(ev.item.resourceVersion == "17");
  REQUIRE(std::holds_alternative<state::ServicePtr>(ev.item.object));
  auto svc = std::get<state::ServicePtr>(ev.item.object);
  CHECK(svc->clusterIPs == std::vector<std::string>{"10.96.0.10"});
  CHECK(svc->meta.annotations.empty());
}

TEST_CASE("watch event: items of list-like objects without kind take the expected kind") {
  WatchEvent ev;
  REQUIRE_FALSE(decodeWatchEvent(
      R"({"type":"MODIFIED","object":{"metadata":{"name":"web-abc","namespace":"prod","resourceVersion":"9",)"
      R"("labels":{"kubernetes.io/service-name":"web"},"annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"2026-12-03T06:50:01Z"}},)"
      R"("addressType":"IPv4","endpoints":[{"addresses":["10.1.0.5"]}],"ports":[{"port":8080}]}})",
      "EndpointSlice", ev));
  CHECK(ev.type == WatchEvent::Type::Modified);
  auto slice = std::get<state::SlicePtr>(ev.item.object);
  CHECK(slice->serviceName == "web");
  CHECK(slice->meta.annotations.at(kLastChangeTriggerTime) == "2026-12-03T06:50:01Z");
}

TEST_CASE("watch event: DELETED, BOOKMARK and ERROR 410") {
  WatchEvent del;
  REQUIRE_FALSE(decodeWatchEvent(
      R"({"type":"DELETED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","resourceVersion":"30"}}})", "Node", del));
  CHECK(del.type == WatchEvent::Type::Deleted);
  CHECK(del.item.key == "n1");
  WatchEvent bm;
  REQUIRE_FALSE(decodeWatchEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"44","annotations":{"k8s.io/initial-events-end":"true"}}}})",
      "Service", bm));
  CHECK(bm.type == WatchEvent::Type::Bookmark);
  CHECK(bm.item.resourceVersion == "44");
  WatchEvent err;
  REQUIRE_FALSE(decodeWatchEvent(
      R"J({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (40)","reason":"Expired","code":410}})J",
      "Service", err));
  CHECK(err.type == WatchEvent::Type::Error);
  CHECK(err.errorCode == 410);
  CHECK(err.errorText == "Expired: too old resource version: 5 (40)");
}

TEST_CASE("watch event: malformed lines and unknown types are errors, invalid objects are items with an error") {
  WatchEvent ev;
  CHECK(decodeWatchEvent("{\"type\":\"ADDED\",", "Service", ev)->find("invalid JSON") == 0);
  CHECK(decodeWatchEvent("[1,2]", "Service", ev));
  CHECK(decodeWatchEvent(R"({"object":{}})", "Service", ev));
  CHECK(decodeWatchEvent(R"({"type":"ADDED"})", "Service", ev));
  CHECK(decodeWatchEvent(R"({"type":"SHRUG","object":{}})", "Service", ev)->find("unknown watch event type") == 0);
  CHECK(decodeWatchEvent(R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"1"}}})", "Service", ev)
            ->find("no metadata.name") != std::string::npos);
  REQUIRE_FALSE(decodeWatchEvent(
      R"({"type":"ADDED","object":{"metadata":{"name":"bad","namespace":"x","resourceVersion":"3"},"spec":{"clusterIP":"10.0.0.1","ports":[{"port":70000}]}}})",
      "Service", ev));
  CHECK(ev.item.key == "x/bad");
  CHECK(std::holds_alternative<std::monostate>(ev.item.object));
  CHECK(ev.item.error.find("70000") != std::string::npos);
  // A slice without its service-name label cannot be filed under a service.
  REQUIRE_FALSE(decodeWatchEvent(
      R"({"type":"ADDED","object":{"metadata":{"name":"orphan","namespace":"x","resourceVersion":"4"},"addressType":"IPv4","endpoints":[]}})",
      "EndpointSlice", ev));
  CHECK(ev.item.error.find("service-name") != std::string::npos);
}

TEST_CASE("list page: resourceVersion, continue, items good and bad") {
  ListPage page;
  REQUIRE_FALSE(decodeListPage(
      R"({"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"100","continue":"tok1"},"items":[)"
      R"({"metadata":{"name":"a","namespace":"default","resourceVersion":"90"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":53,"protocol":"UDP"}]}},)"
      R"({"metadata":{"name":"b","resourceVersion":"91"},"spec":{"clusterIP":"nope","ports":[{"port":53}]}}]})",
      "Service", page));
  CHECK(page.resourceVersion == "100");
  CHECK(page.continueToken == "tok1");
  REQUIRE(page.items.size() == 2);
  CHECK(page.items[0].key == "default/a");
  CHECK(page.items[0].error.empty());
  CHECK(page.items[1].key == "default/b");
  CHECK_FALSE(page.items[1].error.empty());
  ListPage empty;
  REQUIRE_FALSE(decodeListPage(R"({"metadata":{"resourceVersion":"7"},"items":null})", "Node", empty));
  CHECK(empty.items.empty());
  ListPage bad;
  CHECK(decodeListPage("<html>", "Node", bad));
  CHECK(decodeListPage(R"({"items":[]})", "Node", bad)->find("resourceVersion") != std::string::npos);
  CHECK(decodeListPage(R"({"metadata":{"resourceVersion":"7"},"items":{}})", "Node", bad));
}

TEST_CASE("RFC 3339 trigger times") {
  using namespace std::chrono;
  auto t = source::parseRfc3339("2026-12-03T06:50:01Z");
  REQUIRE(t);
  CHECK(duration_cast<seconds>(t->time_since_epoch()).count() == 1796280601);
  auto frac = source::parseRfc3339("2026-12-03T06:50:01.250Z");
  REQUIRE(frac);
  CHECK(duration_cast<milliseconds>(*frac - *t).count() == 250);
  auto off = source::parseRfc3339("2026-12-03T07:50:01+01:00");
  REQUIRE(off);
  CHECK(*off == *t);
  CHECK_FALSE(source::parseRfc3339("yesterday"));
  CHECK_FALSE(source::parseRfc3339("2026-12-03T06:50:01"));
}

}  // namespace
}  // namespace kpn::kube
