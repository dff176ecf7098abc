// The field table (pkg/config/fields.h) that the decoder, the encoder, equality and the flags read:
// every field, changed alone, is seen by each of them.
#include <doctest/doctest.h>

#include <set>

#include "pkg/config/decode.h"
#include "pkg/config/encode.h"
#include "pkg/config/fields.h"
#include "pkg/config/flag_table.h"

using namespace kpn::config;
using namespace std::chrono;

namespace {

// A value of the field's type that differs from any default and that the decoder keeps as given
// (no zero durations: those count as unset).
struct Changed {
  FieldKind kind;
  void operator()(std::string& v) const { v = kind == FieldKind::Quantity ? "64Ki" : v + "-changed"; }
  void operator()(bool& v) const { v = !v; }
  void operator()(int32_t& v) const { v += 7; }
  void operator()(float& v) const { v += 1.5f; }
  void operator()(Duration& v) const { v += milliseconds(1500); }
  void operator()(std::vector<std::string>& v) const { v.push_back("10.0.0.0/8"); }
  void operator()(std::map<std::string, bool>& v) const { v["SomeGate"] = true; }
  void operator()(std::vector<VModule>& v) const { v.push_back({"sync*", 3}); }
};

ProxyConfig withChanged(const ConfigField& field) {
  ProxyConfig c;
  std::visit([&](auto member) { Changed{field.kind}(member(c)); }, field.member);
  return c;
}

// A flag's text for the value Changed gives the default configuration's field.
std::string flagText(const ConfigField& field, const ProxyConfig& changed) {
  switch (field.kind) {
    case FieldKind::Text: return fieldValue(std::get<Member<std::string>>(field.member), changed);
    case FieldKind::Quantity: return "64Ki";
    case FieldKind::Bool: return fieldValue(std::get<Member<bool>>(field.member), changed) ? "true" : "false";
    case FieldKind::Int32: return std::to_string(fieldValue(std::get<Member<int32_t>>(field.member), changed));
    case FieldKind::Float32: return std::to_string(fieldValue(std::get<Member<float>>(field.member), changed));
    case FieldKind::Duration:
    case FieldKind::DurationOrNanos: {
      auto ms = duration_cast<milliseconds>(fieldValue(std::get<Member<Duration>>(field.member), changed));
      return std::to_string(ms.count()) + "ms";
    }
    case FieldKind::TextList:
    case FieldKind::AddressList: return "10.0.0.0/8";
    case FieldKind::BoolMap: return "SomeGate=true";
    case FieldKind::VModules: return "sync*=3";
  }
  return "";
}

}  // namespace

TEST_CASE("field table: each field, changed alone, is seen by equality and survives --write-config-to") {
  for (const ConfigField& field : configFields()) {
    CAPTURE(field.path);
    const ProxyConfig changed = withChanged(field);
    CHECK(changed != ProxyConfig{});
    const std::string yaml = encodeProxyConfig(changed);
    ProxyConfig back;
    auto err = decodeProxyConfig(yaml, back);
    REQUIRE_MESSAGE(!err, *err << "\n" << yaml);
    CHECK_MESSAGE(back == changed, yaml);
  }
}

TEST_CASE("field table: paths are unique and every section a path names is a map of the document") {
  std::set<std::string> paths;
  for (const ConfigField& field : configFields()) CHECK_MESSAGE(paths.insert(field.path).second, field.path);
  // A path that is also the start of another ("logging" and "logging.format") would be both a value and a map.
  for (const std::string& p : paths)
    for (const std::string& q : paths) CHECK_MESSAGE(q.rfind(p + ".", 0) != 0, p << " and " << q);
}

TEST_CASE("field table: each field's flags are in the flag table and set that field, and only flags of fields do") {
  for (const ConfigField& field : configFields()) {
    for (const char* name : field.flags) {
      CAPTURE(name);
      const FlagSpec* flag = findFlag(name);
      REQUIRE(flag);
      CHECK((flag->kind == FlagKind::Field || flag->kind == FlagKind::Logging));
      REQUIRE(flag->apply);
      const ProxyConfig changed = withChanged(field);
      Loaded l;
      flag->apply(l, flagText(field, changed));
      bool set = std::visit([&](auto member) { return fieldValue(member, l.config) == fieldValue(member, changed); },
                            field.member);
      CHECK_MESSAGE(set, field.path);
    }
  }
  // A flag with no field sets nothing of the configuration (its apply, if any, is its own).
  for (const FlagSpec& flag : flagTable())
    if (fieldsOfFlag(flag.name).empty() && flag.kind == FlagKind::Field) CHECK_MESSAGE(!flag.apply, flag.name);
}

TEST_CASE("--write-config-to: keys sorted as upstream's writer sorts them (byte order: windowsRunAsService, then winkernel)") {
  const std::string yaml = encodeProxyConfig(ProxyConfig{});
  CHECK(yaml.find("windowsRunAsService:") < yaml.find("winkernel:"));
  CHECK(yaml.find("apiVersion:") < yaml.find("bindAddress:"));
  CHECK(yaml.find("iptables:") < yaml.find("ipvs:"));
  CHECK(yaml.find("\nkind: \"KubeProxyConfiguration\"") != std::string::npos);
}
