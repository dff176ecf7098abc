#include "pkg/api/yaml_stream.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

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
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false;
  YAML::Mark last_;
};

}  // namespace

std::vector<YAML::Node> loadYamlStream(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ProgressCheck check;
  while (parser.HandleNextDocument(check)) {
  }
  return YAML::LoadAll(text);
}

}  // namespace kpn::api
