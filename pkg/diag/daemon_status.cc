#include "pkg/diag/daemon_status.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>

#include "pkg/diag/json_fields.h"

namespace kpn::diag {

using json::flag;
using json::member;
using json::num;
using json::str;
using json::unum;

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void kv(Writer& w, const char* k, const std::string& v) {
  w.Key(k);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}
void kv(Writer& w, const char* k, double v) {
  w.Key(k);
  w.Double(v);
}
void kvU(Writer& w, const char* k, uint64_t v) {
  w.Key(k);
  w.Uint64(v);
}
void kvB(Writer& w, const char* k, bool v) {
  w.Key(k);
  w.Bool(v);
}

std::string seconds(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
  return buf;
}

}  // namespace

std::string statusJson(const DaemonStatus& s) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  kv(w, "version", s.version);
  kv(w, "commit", s.commit);
  w.Key("pid");
  w.Int64(s.pid);
  kv(w, "startedAt", s.startedAt);
  kv(w, "uptimeSeconds", s.uptimeSeconds);
  kv(w, "node", s.node);
  w.Key("source");
  w.StartObject();
  kv(w, "kind", s.source.kind);
  kv(w, "describe", s.source.describe);
  kvB(w, "synced", s.source.synced);
  kv(w, "pending", s.source.pending);
  kvB(w, "connected", s.source.connected);
  w.Key("resources");
  w.StartArray();
  for (const auto& r : s.source.resources) {
    w.StartObject();
    kv(w, "name", r.name);
    kvB(w, "listed", r.listed);
    kv(w, "lastError", r.lastError);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("sync");
  w.StartObject();
  kvU(w, "syncs", s.syncs);
  kvU(w, "consecutiveFailures", static_cast<uint64_t>(s.consecutiveFailures));
  w.Key("lastSuccess");
  if (s.lastSuccess) {
    w.StartObject();
    kv(w, "at", s.lastSuccess->at);
    kv(w, "ageSeconds", s.lastSuccess->ageSeconds);
    kv(w, "plan", s.lastSuccess->plan);
    kvU(w, "ops", s.lastSuccess->ops);
    kv(w, "durationMs", s.lastSuccess->durationMs);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("lastFailure");
  if (s.lastFailure) {
    w.StartObject();
    kv(w, "at", s.lastFailure->at);
    kv(w, "ageSeconds", s.lastFailure->ageSeconds);
    kv(w, "error", s.lastFailure->error);
    w.EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
  w.Key("services");
  w.StartObject();
  kvU(w, "known", s.servicesKnown);
  kvU(w, "programmed", s.servicesProgrammed);
  w.Key("refused");
  w.StartArray();
  for (const auto& r : s.refused) {
    w.StartObject();
    kv(w, "service", r.service);
    kv(w, "error", r.error);
    kv(w, "since", r.since);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("families");
  w.StartArray();
  for (const auto& f : s.families) w.String(f.c_str());
  w.EndArray();
  w.Key("repairs");
  w.StartObject();
  kvU(w, "count", s.repairs);
  kv(w, "lastAt", s.lastRepairAt);
  w.EndObject();
  w.Key("events");
  if (s.events) {
    w.StartObject();
    kvU(w, "created", s.events->created);
    kvU(w, "patched", s.events->patched);
    kvU(w, "dropped", s.events->dropped);
    w.EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
  return std::string(b.GetString(), b.GetSize());
}

DaemonStatus statusFromJson(const rapidjson::Value& v) {
  DaemonStatus s;
  s.version = str(v, "version");
  s.commit = str(v, "commit");
  if (const auto* p = member(v, "pid"); p && p->IsInt64()) s.pid = p->GetInt64();
  s.startedAt = str(v, "startedAt");
  s.uptimeSeconds = num(v, "uptimeSeconds");
  s.node = str(v, "node");
  if (const auto* src = member(v, "source")) {
    s.source.kind = str(*src, "kind");
    s.source.describe = str(*src, "describe");
    s.source.synced = flag(*src, "synced");
    s.source.pending = str(*src, "pending");
    s.source.connected = flag(*src, "connected");
    if (const auto* rs = member(*src, "resources"); rs && rs->IsArray())
      for (const auto& r : rs->GetArray()) s.source.resources.push_back({str(r, "name"), flag(r, "listed"), str(r, "lastError")});
  }
  if (const auto* sy = member(v, "sync")) {
    s.syncs = unum(*sy, "syncs");
    s.consecutiveFailures = static_cast<int>(unum(*sy, "consecutiveFailures"));
    if (const auto* ok = member(*sy, "lastSuccess"))
      s.lastSuccess = SyncSuccess{str(*ok, "at"), num(*ok, "ageSeconds"), str(*ok, "plan"), unum(*ok, "ops"),
                                  num(*ok, "durationMs")};
    if (const auto* bad = member(*sy, "lastFailure"))
      s.lastFailure = SyncFailure{str(*bad, "at"), num(*bad, "ageSeconds"), str(*bad, "error")};
  }
  if (const auto* sv = member(v, "services")) {
    s.servicesKnown = unum(*sv, "known");
    s.servicesProgrammed = unum(*sv, "programmed");
    if (const auto* rs = member(*sv, "refused"); rs && rs->IsArray())
      for (const auto& r : rs->GetArray()) s.refused.push_back({str(r, "service"), str(r, "error"), str(r, "since")});
  }
  if (const auto* fs = member(v, "families"); fs && fs->IsArray())
    for (const auto& f : fs->GetArray())
      if (f.IsString()) s.families.push_back(f.GetString());
  if (const auto* rp = member(v, "repairs")) {
    s.repairs = unum(*rp, "count");
    s.lastRepairAt = str(*rp, "lastAt");
  }
  if (const auto* ev = member(v, "events")) s.events = EventCounts{unum(*ev, "created"), unum(*ev, "patched"), unum(*ev, "dropped")};
  return s;
}

std::optional<DaemonStatus> parseStatus(const std::string& text, std::string* error) {
  rapidjson::Document d;
  if (!json::parseAnswer(d, text, error)) return std::nullopt;
  if (!member(d, "version")) {
    *error = "the daemon's answer is not a status";
    return std::nullopt;
  }
  return statusFromJson(d);
}

std::string statusText(const DaemonStatus& s) {
  std::string out = "daemon: kube-proxy-nft " + s.version + " (commit " + s.commit + "), pid " + std::to_string(s.pid) +
                    ", up " + seconds(s.uptimeSeconds) + ", node " + s.node + "\n";
  out += "source: " + s.source.describe + " — " + (s.source.connected ? "connected" : "NOT connected") + ", " +
         (s.source.synced ? "synced" : "not synced yet (waiting for " + s.source.pending + ")") + "\n";
  for (const auto& r : s.source.resources)
    out += "  " + r.name + ": " + (r.listed ? "listed" : "not listed yet") +
           (r.lastError.empty() ? "" : "; last request failed: " + r.lastError) + "\n";
  out += "syncs: " + std::to_string(s.syncs);
  if (s.lastSuccess) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f ms", s.lastSuccess->durationMs);
    out += ", last success " + seconds(s.lastSuccess->ageSeconds) + " ago (" + s.lastSuccess->at + ", " +
           s.lastSuccess->plan + ", " + std::to_string(s.lastSuccess->ops) + " operations, " + ms + ")";
  } else {
    out += ", no successful sync yet";
  }
  out += "\n";
  if (s.lastFailure)
    out += "last failed sync: " + seconds(s.lastFailure->ageSeconds) + " ago (" + s.lastFailure->at + "; " +
           (s.consecutiveFailures ? std::to_string(s.consecutiveFailures) + " in a row now" : std::string("syncs succeed again")) +
           "): " + s.lastFailure->error + "\n";
  else
    out += "last failed sync: none\n";
  out += "services: " + std::to_string(s.servicesKnown) + " known, " + std::to_string(s.servicesProgrammed) +
         " programmed, " + std::to_string(s.refused.size()) + " refused by the kernel\n";
  for (const auto& r : s.refused) out += "  refused: " + r.service + " since " + r.since + ": " + r.error + "\n";
  std::string fams;
  for (const auto& f : s.families) fams += (fams.empty() ? "" : ", ") + f;
  out += "families: " + (fams.empty() ? std::string("(none yet: no sync has probed the kernel)") : fams) + "\n";
  out += "repairs of outside changes: " + std::to_string(s.repairs) +
         (s.lastRepairAt.empty() ? "" : ", last at " + s.lastRepairAt) + "\n";
  if (s.events)
    out += "events: " + std::to_string(s.events->created) + " created, " + std::to_string(s.events->patched) +
           " series updates, " + std::to_string(s.events->dropped) + " dropped\n";
  else
    out += "events: none (no API source)\n";
  return out;
}

}  // namespace kpn::diag
