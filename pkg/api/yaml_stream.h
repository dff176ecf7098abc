// Loading YAML with yaml-cpp 0.7, guarded against its endless loop and its mis-decoded escapes.
#pragma once

#include <yaml-cpp/node/node.h>

#include <string>
#include <vector>

namespace kpn::api {

// YAML::LoadAll, except that a stream yaml-cpp cannot get past (a token that cannot start a
// node at the top level, e.g. a stray ",") throws YAML::ParserException at that token instead of
// yielding empty documents until memory runs out. Throws what YAML::LoadAll throws otherwise.
std::vector<YAML::Node> loadYamlStream(const std::string& text);

// YAML::Load (the first document only, as go-yaml's Unmarshal that kubectl's kubeconfig loader
// uses), with the same refusals as loadYamlStream: control characters, and values yaml-cpp would
// decode to bytes that are not UTF-8.
YAML::Node loadYamlDocument(const std::string& text);

}  // namespace kpn::api
