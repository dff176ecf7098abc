#include "pkg/api/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "pkg/api/yaml_stream.h"

namespace kpn::api {
namespace {

constexpr int kMaxDepth = 100;  // deeper than any Kubernetes object
// Aliases are shared in yaml-cpp's tree but copied into JSON: a "billion laughs" document would
// expand exponentially. 20k real objects are about 2 million.
constexpr size_t kMaxValues = 10'000'000;

using Alloc = rapidjson::Document::AllocatorType;

[[noreturn]] void fail(const YAML::Node& n, const std::string& what) {
  const YAML::Mark m = n.Mark();
  throw std::runtime_error("line " + std::to_string(m.line + 1) + ", column " +
                           std::to_string(m.column + 1) + ": " + what);
}

bool isPlainBool(const std::string& s, bool* value) {
  if (s == "true" || s == "True" || s == "TRUE") return *value = true, true;
  if (s == "false" || s == "False" || s == "FALSE") return *value = false, true;
  return false;
}

bool isPlainInt(const std::string& s, int64_t* value) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9') return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE) return false;  // too big for int64: keep the text rather than clamp it
  *value = v;
  return true;
}

void scalarToJson(const YAML::Node& n, rapidjson::Value& out, Alloc& alloc) {
  const std::string& text = n.Scalar();
  const std::string& tag = n.Tag();
  // "?" marks a plain (unquoted) scalar; "!" a quoted or block one, which is always a string.
  if (tag == "?" || tag == "tag:yaml.org,2002:bool" || tag == "tag:yaml.org,2002:int") {
    bool b;
    int64_t i;
    if (isPlainBool(text, &b)) return void(out.SetBool(b));
    if (isPlainInt(text, &i)) return void(out.SetInt64(i));
    if (tag == "?" && YAML::IsNullString(text)) return void(out.SetNull());
  }
  out.SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), alloc);
}

void toJson(const YAML::Node& n, rapidjson::Value& out, Alloc& alloc, int depth, size_t& budget) {
  if (depth > kMaxDepth) fail(n, "nesting deeper than " + std::to_string(kMaxDepth));
  if (budget-- == 0) fail(n, "more than " + std::to_string(kMaxValues) + " values (aliases expanding without end?)");
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      scalarToJson(n, out, alloc);
      return;
    case YAML::NodeType::Sequence:
      out.SetArray();
      out.Reserve(static_cast<rapidjson::SizeType>(n.size()), alloc);
      for (const YAML::Node& item : n) {
        rapidjson::Value v;
        toJson(item, v, alloc, depth + 1, budget);
        out.PushBack(v, alloc);
      }
      return;
    case YAML::NodeType::Map:
      out.SetObject();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) fail(kv.first, "mapping key is not a scalar");
        const std::string& key = kv.first.Scalar();
        rapidjson::Value k(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc);
        rapidjson::Value v;
        toJson(kv.second, v, alloc, depth + 1, budget);
        out.AddMember(k, v, alloc);
      }
      return;
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out.SetNull();
      return;
  }
}

}  // namespace

std::vector<rapidjson::Document> yamlToJson(std::string_view text) {
  std::vector<YAML::Node> docs;
  try {
    docs = loadYamlStream(std::string(text));
  } catch (const YAML::Exception& e) {
    // e.msg without yaml-cpp's "yaml-cpp: error at" prefix; the mark is 0-based.
    throw std::runtime_error("line " + std::to_string(e.mark.line + 1) + ", column " +
                             std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  std::vector<rapidjson::Document> out(docs.size());
  size_t budget = kMaxValues;
  for (size_t i = 0; i < docs.size(); ++i) toJson(docs[i], out[i], out[i].GetAllocator(), 0, budget);
  return out;
}

}  // namespace kpn::api
