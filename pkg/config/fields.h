// The KubeProxyConfiguration schema in one table: each field's place in the document (its path,
// which is also its member's path in ProxyConfig), the kind of value it holds, the flags that set
// it when there is no --config, and the member itself. The decoder, the encoder
// (--write-config-to), equality and the flag layer all read this table, so a new field is a
// member with its default in proxy_config.h and one line in fields.cc (plus a help line in
// flag_table.cc when it has a flag, and a rule in validate.cc when it has one).
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "pkg/config/proxy_config.h"

namespace kpn::config {

enum class FieldKind {
  Text,             // a string
  Quantity,         // a resource quantity ("64Ki", 0): a string or a number in the document
  Bool,
  Int32,
  Float32,
  Duration,         // Go's syntax: "30s", "1h0m0s"
  DurationOrNanos,  // as Duration, or a number of nanoseconds (component-base's flushFrequency)
  TextList,         // strings; a flag's comma-separated items add to it
  AddressList,      // as TextList, each flag item checked ("primary" or a CIDR: flagNodePortAddresses)
  BoolMap,          // NAME: bool (feature gates)
  VModules,         // [{filePattern, verbosity}]
};

// The member a field is stored in. It only names the member: reading a const configuration
// through it (fieldValue below) never writes.
template <typename T>
using Member = T& (*)(ProxyConfig&);
using AnyMember = std::variant<Member<std::string>, Member<bool>, Member<int32_t>, Member<float>, Member<Duration>,
                               Member<std::vector<std::string>>, Member<std::map<std::string, bool>>,
                               Member<std::vector<VModule>>>;

struct ConfigField {
  const char* path;  // "conntrack.maxPerCore"
  FieldKind kind;
  std::vector<const char*> flags;  // dashed names; a flag may set several fields (--masquerade-all)
  AnyMember member;
};

// Every field, in the order the decoder reads them (the document's order is free).
const std::vector<ConfigField>& configFields();

// The fields a flag sets when there is no --config (none: the flag has no field, or the
// precedence code reads it itself).
std::vector<const ConfigField*> fieldsOfFlag(const std::string& flag);

template <typename T>
const T& fieldValue(Member<T> member, const ProxyConfig& c) {
  return member(const_cast<ProxyConfig&>(c));
}

}  // namespace kpn::config
