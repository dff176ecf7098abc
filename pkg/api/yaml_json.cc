#include "pkg/api/yaml_json.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

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

// yaml-cpp 0.7 never ends YAML::LoadAll on a stream whose next token cannot start a node at the
// top level (a stray ",", also after a tag or an anchor: found by unit/fuzz/manifest_yaml): it
// emits an empty document without consuming the token, again and again, until memory runs out.
// This event-only pass (cheap: no nodes are built) watches for a document that starts where the
// previous one started and refuses the stream there.
class ProgressCheck : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (started_ && mark.pos == last_.pos) {
      // yaml-cpp marks are 0-based; the message has the same shape as yaml-cpp's own.
      throw YAML::ParserException(mark, "unexpected token at the start of a document");
    }
    started_ = true;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false;
  YAML::Mark last_;
};

void checkProgress(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ProgressCheck check;
  while (parser.HandleNextDocument(check)) {
  }
}

}  // namespace

std::vector<rapidjson::Document> yamlToJson(std::string_view text) {
  std::vector<YAML::Node> docs;
  try {
    std::string whole(text);
    checkProgress(whole);
    docs = YAML::LoadAll(whole);
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
