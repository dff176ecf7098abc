#include "pkg/api/yaml_stream.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include <sstream>

#include "pkg/api/utf8.h"

namespace kpn::api {
namespace {

// yaml-cpp 0.7 never ends YAML::LoadAll on a stream whose next token cannot start a node at the
// top level (a stray ",", also after a tag or an anchor: found by unit/fuzz/manifest_yaml and
// again by unit/fuzz/kube_proxy_config): it emits an empty document without consuming the token,
// again and again. This event-only pass (cheap: no nodes are built) watches for a document that
// starts where the previous one started and refuses the stream there.
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
  // yaml-cpp 0.7 decodes the escapes "\N" and "\_" to the single bytes 0x85 and 0xA0, not to
  // UTF-8 (found by unit/fuzz/kube_proxy_config: --write-config-to then wrote U+FFFD back). A
  // value that is not UTF-8 after decoding is refused where it starts.
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string& value) override {
    if (firstInvalidUtf8(value)) throw YAML::ParserException(mark, "a value that decodes to bytes that are not UTF-8 (yaml-cpp's \\N and \\_ escapes)");
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false;
  YAML::Mark last_;
};

// YAML 1.2's c-printable, as upstream's decoder (go-yaml) enforces it: no C0 control character
// but tab, LF and CR, no DEL, no C1 control but NEL, not U+FFFE or U+FFFF. yaml-cpp
// reads a NUL byte as a backslash (found by the same fuzzer: NUL, "_" became the "\_" escape).
// Bytes that are not UTF-8 are left to the caller (the config decoder refuses them first).
std::optional<size_t> firstNonPrintable(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto cp = decodeUtf8At(text, i);
    if (!cp) {
      ++i;
      continue;
    }
    const uint32_t v = cp->value;
    if ((v < 0x20 && v != '\t' && v != '\n' && v != '\r') || v == 0x7F || (v >= 0x80 && v <= 0x9F && v != 0x85) ||
        v == 0xFFFE || v == 0xFFFF)
      return i;
    i += cp->length;
  }
  return std::nullopt;
}

void refuseNonPrintable(const std::string& text) {
  if (auto at = firstNonPrintable(text)) {
    YAML::Mark mark;
    mark.pos = static_cast<int>(*at);
    mark.line = static_cast<int>(std::count(text.begin(), text.begin() + *at, '\n'));
    const size_t newline = *at == 0 ? std::string::npos : text.rfind('\n', *at - 1);
    mark.column = static_cast<int>(newline == std::string::npos ? *at : *at - newline - 1);
    throw YAML::ParserException(mark, "control characters are not allowed");
  }
}

// The refusals both loaders share, before yaml-cpp builds any node: the bytes first, then an
// event-only pass over the documents the loader will read.
void checkYaml(const std::string& text, bool wholeStream) {
  refuseNonPrintable(text);
  std::istringstream in(text);
  YAML::Parser parser(in);
  ProgressCheck check;
  while (parser.HandleNextDocument(check) && wholeStream) {
  }
}

}  // namespace

std::vector<YAML::Node> loadYamlStream(const std::string& text) {
  checkYaml(text, /*wholeStream=*/true);
  return YAML::LoadAll(text);
}

YAML::Node loadYamlDocument(const std::string& text) {
  checkYaml(text, /*wholeStream=*/false);
  return YAML::Load(text);
}

}  // namespace kpn::api
