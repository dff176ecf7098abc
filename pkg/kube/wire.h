// The Kubernetes list/watch wire format, decoded: a list page (items, resourceVersion, continue)
// and a watch event. Objects are decoded into the proxy's value types right here (through
// api::decodeObjectAs), so nothing downstream sees JSON. Pure functions; never throw.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "pkg/state/cluster_state.h"

namespace kpn::kube {

// One decoded object, or monostate when it failed to decode or validate (see WireItem::error).
using Object = std::variant<std::monostate, state::ServicePtr, state::SlicePtr, state::NodePtr, state::ServiceCIDRPtr>;

struct WireItem {
  std::string key;              // "ns/name" (namespaced kinds) or "name"; "" when even that is unreadable
  std::string resourceVersion;  // metadata.resourceVersion as sent
  Object object;                // empty when invalid
  std::string error;            // why the object was skipped
};

struct ListPage {
  std::string resourceVersion;
  std::string continueToken;
  std::vector<WireItem> items;
};

// `kind` is the item kind ("Service", "EndpointSlice", "Node", "ServiceCIDR"). Returns an error text when the
// body is not a list at all; bad single items come back with their error set.
std::optional<std::string> decodeListPage(std::string_view body, const std::string& kind, ListPage& out);

struct WatchEvent {
  enum class Type { Added, Modified, Deleted, Bookmark, Error };
  Type type = Type::Added;
  WireItem item;          // Added/Modified/Deleted; for Bookmark only resourceVersion is set
  int errorCode = 0;      // Error: the Status's code (410 = resourceVersion too old)
  std::string errorText;  // Error: the Status's reason and message
};

// Returns an error text for a line that is not a watch event (bad JSON, no type, unknown type).
std::optional<std::string> decodeWatchEvent(std::string_view line, const std::string& kind, WatchEvent& out);

// The annotation on EndpointSlices that says when the change that produced them happened.
inline constexpr const char* kLastChangeTriggerTime = "endpoints.kubernetes.io/last-change-trigger-time";

}  // namespace kpn::kube
