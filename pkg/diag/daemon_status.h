// What the running daemon says about itself (`kube-proxy-nft status`, and the state part of a
// `trace`): a value, its JSON (the contract in docs/operations.md) and the JSON read back.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kpn::diag {

struct ResourceStatus {
  std::string name;  // "Services", ..., "folder"
  bool listed = false;
  std::string lastError;
};

struct SourceStatus {
  std::string kind;      // "api" | "manifests"
  std::string describe;  // "API server https://...", "manifest folder /x"
  bool synced = false;   // complete enough to sync (Services and EndpointSlices listed)
  std::string pending;   // what has not listed yet
  bool connected = true; // no resource's last request failed
  std::vector<ResourceStatus> resources;
};

struct SyncSuccess {
  std::string at;  // RFC 3339
  double ageSeconds = 0;
  std::string plan;  // "incremental" | "reconcile" | "full"
  uint64_t ops = 0;
  double durationMs = 0;
};

struct SyncFailure {
  std::string at;
  double ageSeconds = 0;
  std::string error;
};

struct RefusedService {
  std::string service;  // ns/name
  std::string error;
  std::string since;
};

struct EventCounts {
  uint64_t created = 0, patched = 0, dropped = 0;
};

struct DaemonStatus {
  std::string version, commit;
  int64_t pid = 0;
  std::string startedAt;
  double uptimeSeconds = 0;
  std::string node;
  SourceStatus source;
  uint64_t syncs = 0;  // attempts, failed ones included
  int consecutiveFailures = 0;
  std::optional<SyncSuccess> lastSuccess;
  std::optional<SyncFailure> lastFailure;
  uint64_t servicesKnown = 0;       // in the state (ours: the proxy selector applied)
  uint64_t servicesProgrammed = 0;  // proxied here and not refused
  std::vector<RefusedService> refused;
  std::vector<std::string> families;  // "ip", "ip6": what the kernel runs nftables for
  uint64_t repairs = 0;               // syncs that compared with the kernel after outside changes
  std::string lastRepairAt;
  std::optional<EventCounts> events;  // null without an API source
};

std::string statusJson(const DaemonStatus& s);
// nullopt and *error for a body that is not a status.
std::optional<DaemonStatus> parseStatus(const std::string& json, std::string* error);
DaemonStatus statusFromJson(const rapidjson::Value& v);  // missing fields keep their defaults
std::string statusText(const DaemonStatus& s);

}  // namespace kpn::diag
