// YAML -> RapidJSON, so that YAML and JSON manifests share one decoder.
#pragma once

#include <rapidjson/document.h>

#include <string_view>
#include <vector>

namespace kpn::api {

// Parses a multi-document YAML stream into one rapidjson::Document per document (an empty
// document becomes null). Scalar typing follows what the Kubernetes YAML reader does for the
// fields we read: a quoted or block scalar is always a string; a plain true/false (any case
// YAML 1.2 allows) is a bool, a plain decimal integer that fits int64 is an integer, null/~/empty
// is null, anything else is a string. Mapping keys are always strings.
// Throws std::runtime_error with a "line N, column M" message when the stream does not parse or
// uses a construct JSON cannot hold (a non-scalar mapping key, nesting deeper than 100, aliases
// expanding to more than 10 million values).
std::vector<rapidjson::Document> yamlToJson(std::string_view text);

}  // namespace kpn::api
