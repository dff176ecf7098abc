#include "pkg/config/encode.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "pkg/config/duration.h"
#include "pkg/config/fields.h"

namespace kpn::config {

namespace {

// The shortest decimal text that reads back as the same float.
std::string floatText(float f) {
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return buf;
}

// The document as a tree of the table's paths; std::map keeps each mapping's keys sorted as
// upstream's writer sorts them (byte order).
struct Tree {
  const ConfigField* field = nullptr;  // a leaf of the table
  const char* fixed = nullptr;         // or a leaf of constant text (apiVersion, kind)
  std::map<std::string, Tree> children;
};

Tree documentTree() {
  Tree root;
  for (const ConfigField& field : configFields()) {
    Tree* at = &root;
    std::string path = field.path;
    for (size_t dot; (dot = path.find('.')) != std::string::npos; path = path.substr(dot + 1))
      at = &at->children[path.substr(0, dot)];
    at->children[path].field = &field;
  }
  root.children["apiVersion"].fixed = kApiVersion;
  root.children["kind"].fixed = kKind;
  return root;
}

void quoted(YAML::Emitter& out, const std::string& v) { out << YAML::DoubleQuoted << v; }

void value(YAML::Emitter& out, const ConfigField& field, const ProxyConfig& c) {
  auto member = [&](auto type) -> const auto& {
    return fieldValue(std::get<Member<decltype(type)>>(field.member), c);
  };
  switch (field.kind) {
    case FieldKind::Text:
    case FieldKind::Quantity: return quoted(out, member(std::string()));
    case FieldKind::Bool: out << (member(bool()) ? "true" : "false"); return;
    case FieldKind::Int32: out << std::to_string(member(int32_t())); return;
    case FieldKind::Float32: out << floatText(member(float())); return;
    case FieldKind::Duration:
    case FieldKind::DurationOrNanos: return quoted(out, formatGoDuration(member(Duration())));
    case FieldKind::TextList:
    case FieldKind::AddressList:
      out << YAML::Flow << YAML::BeginSeq;
      for (const std::string& s : member(std::vector<std::string>())) quoted(out, s);
      out << YAML::EndSeq;
      return;
    case FieldKind::BoolMap:
      out << YAML::BeginMap;
      for (const auto& [name, on] : member(std::map<std::string, bool>()))
        out << YAML::Key << name << YAML::Value << (on ? "true" : "false");
      out << YAML::EndMap;
      return;
    case FieldKind::VModules:
      out << YAML::BeginSeq;
      for (const VModule& m : member(std::vector<VModule>())) {
        out << YAML::BeginMap << YAML::Key << "filePattern" << YAML::Value;
        quoted(out, m.filePattern);
        out << YAML::Key << "verbosity" << YAML::Value << m.verbosity << YAML::EndMap;
      }
      out << YAML::EndSeq;
      return;
  }
}

void mapping(YAML::Emitter& out, const Tree& tree, const ProxyConfig& c) {
  out << YAML::BeginMap;
  for (const auto& [key, node] : tree.children) {
    out << YAML::Key << key << YAML::Value;
    if (node.field)
      value(out, *node.field, c);
    else if (node.fixed)
      quoted(out, node.fixed);
    else
      mapping(out, node, c);
  }
  out << YAML::EndMap;
}

}  // namespace

std::string encodeProxyConfig(const ProxyConfig& c) {
  static const Tree tree = documentTree();
  YAML::Emitter out;
  mapping(out, tree, c);
  return std::string(out.c_str()) + "\n";
}

}  // namespace kpn::config
