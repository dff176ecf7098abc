#include "pkg/config/decode.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <stdexcept>

#include "pkg/api/utf8.h"
#include "pkg/api/yaml_stream.h"
#include "pkg/config/duration.h"
#include "pkg/config/fields.h"
#include "pkg/net/ip.h"

namespace kpn::config {

namespace {

// An error that names the field's path; caught once, at the top.
struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// YAML scalars typed as the Kubernetes reader (YAML -> JSON, YAML 1.1 words) types them: a quoted
// scalar is a string; a plain one is null, a bool, a number or else a string.
enum class Kind { Null, Bool, Number, String, List, Map };

bool plainBool(const std::string& s, bool* v) {
  static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"};
  static const std::set<std::string> no = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"};
  if (yes.count(s)) return *v = true, true;
  if (no.count(s)) return *v = false, true;
  return false;
}

bool plainNumber(const std::string& s, double* v) {
  if (s.empty() || s == "." || s == "+" || s == "-") return false;
  const char* b = s.c_str();
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(b, &end);
  if (end != b + s.size() || errno == ERANGE || !std::isfinite(d)) return false;
  // strtod also takes hex, "inf" and "nan": YAML/JSON numbers are decimal.
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'))
      return false;
  *v = d;
  return true;
}

Kind kindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return Kind::Null;
    case YAML::NodeType::Sequence:
      return Kind::List;
    case YAML::NodeType::Map:
      return Kind::Map;
    case YAML::NodeType::Scalar:
      break;
  }
  if (n.Tag() != "?") return Kind::String;  // quoted, block or explicitly tagged: text
  const std::string& s = n.Scalar();
  bool b;
  double d;
  if (YAML::IsNullString(s)) return Kind::Null;
  if (plainBool(s, &b)) return Kind::Bool;
  if (plainNumber(s, &d)) return Kind::Number;
  return Kind::String;
}

std::string describe(const YAML::Node& n) {
  switch (kindOf(n)) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool " + n.Scalar();
    case Kind::Number: return "number " + n.Scalar();
    case Kind::String: return "string \"" + n.Scalar() + "\"";
    case Kind::List: return "a list";
    case Kind::Map: return "a map";
  }
  return "?";
}

[[noreturn]] void wrongType(const std::string& path, const char* want, const YAML::Node& n) {
  throw FieldError(path + ": want " + want + ", got " + describe(n));
}

std::string asString(const YAML::Node& n, const std::string& path) {
  if (kindOf(n) != Kind::String) wrongType(path, "a string", n);
  return n.Scalar();
}

bool asBool(const YAML::Node& n, const std::string& path) {
  bool v = false;
  if (kindOf(n) != Kind::Bool) wrongType(path, "a bool (true or false)", n);
  plainBool(n.Scalar(), &v);
  return v;
}

int32_t asInt32(const YAML::Node& n, const std::string& path) {
  double d = 0;
  if (kindOf(n) != Kind::Number || !plainNumber(n.Scalar(), &d)) wrongType(path, "an integer", n);
  if (d != std::floor(d) || n.Scalar().find_first_of(".eE") != std::string::npos)
    throw FieldError(path + ": " + n.Scalar() + " is not an integer");
  if (d < std::numeric_limits<int32_t>::min() || d > std::numeric_limits<int32_t>::max())
    throw FieldError(path + ": " + n.Scalar() + " does not fit a 32-bit integer");
  return static_cast<int32_t>(d);
}

float asFloat(const YAML::Node& n, const std::string& path) {
  double d = 0;
  if (kindOf(n) != Kind::Number || !plainNumber(n.Scalar(), &d)) wrongType(path, "a number", n);
  return static_cast<float>(d);
}

// metav1.Duration: a string in Go's syntax. A negative one decodes (validation rejects it with
// the field's rule), as upstream.
Duration asDuration(const YAML::Node& n, const std::string& path) {
  if (kindOf(n) != Kind::String) wrongType(path, "a duration string (\"30s\", \"1m30s\")", n);
  std::string text = n.Scalar();
  bool negative = !text.empty() && text[0] == '-';
  auto d = parseGoDuration(negative ? text.substr(1) : text);
  if (!d) throw FieldError(path + ": \"" + text + "\" is not a duration (Go syntax: 500ms, 30s, 1h0m0s)");
  return negative ? -*d : *d;
}

// The fields of one mapping: each getter consumes its key; done() rejects whatever is left.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string path) : node_(node), prefix_(path.empty() ? "" : path + ".") {
    if (kindOf(node) != Kind::Map) {
      if (path.empty()) throw FieldError("the document is " + describe(node) + ", not a KubeProxyConfiguration map");
      wrongType(path, "a map", node);
    }
    for (const auto& kv : node) {
      if (kindOf(kv.first) == Kind::List || kindOf(kv.first) == Kind::Map)
        throw FieldError(prefix_ + "<key>: a mapping key is not a scalar");
      if (!keys_.insert(kv.first.Scalar()).second)
        throw FieldError("duplicate field \"" + prefix_ + kv.first.Scalar() + "\"");
    }
  }

  // The value under `key`, or nullopt when absent or null (null leaves the default, as in Go).
  std::optional<YAML::Node> take(const char* key) {
    used_.insert(key);
    if (!keys_.count(key)) return std::nullopt;
    YAML::Node v = node_[key];
    if (kindOf(v) == Kind::Null) return std::nullopt;
    return v;
  }
  std::string path(const char* key) const { return prefix_ + key; }

  bool str(const char* key, std::string& out) { return get(key, out, asString); }
  bool boolean(const char* key, bool& out) { return get(key, out, asBool); }
  bool int32(const char* key, int32_t& out) { return get(key, out, asInt32); }
  bool float32(const char* key, float& out) { return get(key, out, asFloat); }
  bool duration(const char* key, Duration& out) { return get(key, out, asDuration); }

  bool strings(const char* key, std::vector<std::string>& out) {
    auto v = take(key);
    if (!v) return false;
    if (kindOf(*v) != Kind::List) wrongType(path(key), "a list of strings", *v);
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) out.push_back(asString((*v)[i], path(key) + "[" + std::to_string(i) + "]"));
    return true;
  }

  bool boolMap(const char* key, std::map<std::string, bool>& out) {
    auto v = take(key);
    if (!v) return false;
    Fields m(*v, path(key));
    out.clear();
    for (const std::string& k : m.keys_) {
      auto item = m.take(k.c_str());
      if (!item) throw FieldError(m.path(k.c_str()) + ": want a bool (true or false), got null");
      out[k] = asBool(*item, m.path(k.c_str()));
    }
    return true;
  }

  template <typename T, typename F>
  bool get(const char* key, T& out, F convert) {
    auto v = take(key);
    if (!v) return false;
    out = convert(*v, path(key));
    return true;
  }

  void done() const {
    for (const std::string& k : keys_)
      if (!used_.count(k)) throw FieldError("unknown field \"" + prefix_ + k + "\"");
  }

 private:
  YAML::Node node_;
  std::string prefix_;
  std::set<std::string> keys_, used_;
};

// Runs `body` on the section under `key` when it is present (a null section is an empty one).
template <typename F>
void section(Fields& parent, const char* key, F body) {
  if (auto v = parent.take(key)) {
    Fields f(*v, parent.path(key));
    body(f);
    f.done();
  }
}

// A quantity ("64Ki", 0) is kept as its text.
std::string asQuantity(const YAML::Node& n, const std::string& path) {
  Kind k = kindOf(n);
  if (k != Kind::String && k != Kind::Number) wrongType(path, "a quantity (\"64Ki\", 0)", n);
  return n.Scalar();
}

// component-base's flushFrequency: a duration string or a number of nanoseconds.
Duration asDurationOrNanos(const YAML::Node& n, const std::string& path) {
  if (kindOf(n) == Kind::Number) return Duration(static_cast<int64_t>(asInt32(n, path)));
  return asDuration(n, path);
}

std::vector<VModule> asVModules(const YAML::Node& n, const std::string& path) {
  if (kindOf(n) != Kind::List) wrongType(path, "a list of {filePattern, verbosity}", n);
  std::vector<VModule> out;
  for (size_t i = 0; i < n.size(); ++i) {
    Fields item(n[i], path + "[" + std::to_string(i) + "]");
    VModule m;
    item.str("filePattern", m.filePattern);
    item.int32("verbosity", m.verbosity);
    item.done();
    out.push_back(m);
  }
  return out;
}

// One field of the table from its mapping; true when the document set it.
bool decodeField(Fields& f, const char* key, const ConfigField& field, ProxyConfig& c) {
  auto member = [&](auto type) -> auto& { return std::get<Member<decltype(type)>>(field.member)(c); };
  switch (field.kind) {
    case FieldKind::Text: return f.str(key, member(std::string()));
    case FieldKind::Quantity: return f.get(key, member(std::string()), asQuantity);
    case FieldKind::Bool: return f.boolean(key, member(bool()));
    case FieldKind::Int32: return f.int32(key, member(int32_t()));
    case FieldKind::Float32: return f.float32(key, member(float()));
    case FieldKind::Duration: return f.duration(key, member(Duration()));
    case FieldKind::DurationOrNanos: return f.get(key, member(Duration()), asDurationOrNanos);
    case FieldKind::TextList:
    case FieldKind::AddressList: return f.strings(key, member(std::vector<std::string>()));
    case FieldKind::BoolMap: return f.boolMap(key, member(std::map<std::string, bool>()));
    case FieldKind::VModules: return f.get(key, member(std::vector<VModule>()), asVModules);
  }
  return false;
}

// The fields of the table under `prefix` ("" for the document, "conntrack." for its section) from
// the mapping `f`: a section is read whole where its first field is met. Records the paths the
// document set in `present`.
void decodeFields(Fields& f, const std::string& prefix, ProxyConfig& c, std::set<std::string>& present) {
  std::set<std::string> sections;
  for (const ConfigField& field : configFields()) {
    const std::string path = field.path;
    if (path.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = path.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == std::string::npos) {
      if (decodeField(f, rest.c_str(), field, c)) present.insert(path);
      continue;
    }
    const std::string name = rest.substr(0, dot);
    if (sections.insert(name).second)
      section(f, name.c_str(), [&](Fields& s) { decodeFields(s, prefix + name + ".", c, present); });
  }
}

void decodeDocument(const YAML::Node& doc, ProxyConfig& c) {
  // Their defaults depend on bindAddress's family: decided after decoding.
  c.healthzBindAddress.clear();
  c.metricsBindAddress.clear();
  Fields f(doc, "");
  std::string apiVersion, kind;
  if (!f.str("apiVersion", apiVersion)) throw FieldError("apiVersion: missing (want \"" + std::string(kApiVersion) + "\")");
  if (apiVersion != kApiVersion)
    throw FieldError("apiVersion: \"" + apiVersion + "\" is not \"" + kApiVersion + "\"");
  if (!f.str("kind", kind)) throw FieldError("kind: missing (want \"" + std::string(kKind) + "\")");
  if (kind != kKind) throw FieldError("kind: \"" + kind + "\" is not \"" + kKind + "\"");

  std::set<std::string> present;
  decodeFields(f, "", c, present);
  // "logging.sanitization" was removed upstream in 1.27: like anything else not in the table, it
  // is an unknown field.
  f.done();

  // upstream's SetDefaults_KubeProxyConfiguration: zero values are "unset".
  using std::chrono::seconds;
  if (c.bindAddress.empty()) c.bindAddress = "0.0.0.0";
  bool v4 = net::familyOf(net::canonicalIp(c.bindAddress).value_or("")) != net::Family::V6;
  c.healthzBindAddress = c.healthzBindAddress.empty() ? std::string(v4 ? "0.0.0.0" : "[::]") + ":10256"
                                                      : appendPortIfNeeded(c.healthzBindAddress, 10256);
  c.metricsBindAddress = c.metricsBindAddress.empty() ? std::string(v4 ? "127.0.0.1" : "[::1]") + ":10249"
                                                      : appendPortIfNeeded(c.metricsBindAddress, 10249);
  if (c.iptables.syncPeriod == Duration(0)) c.iptables.syncPeriod = seconds(30);
  if (c.iptables.minSyncPeriod == Duration(0)) c.iptables.minSyncPeriod = seconds(1);
  if (c.ipvs.syncPeriod == Duration(0)) c.ipvs.syncPeriod = seconds(30);
  if (c.configSyncPeriod == Duration(0)) c.configSyncPeriod = std::chrono::minutes(15);
  if (c.clientConnection.contentType.empty()) c.clientConnection.contentType = "application/vnd.kubernetes.protobuf";
  if (c.clientConnection.qps == 0) c.clientConnection.qps = 5;
  if (c.clientConnection.burst == 0) c.clientConnection.burst = 10;
  if (c.logging.format.empty()) c.logging.format = "text";
  if (c.logging.flushFrequency == Duration(0)) c.logging.flushFrequency = seconds(5);

  // nftables.* is what runs; what it leaves out comes from the section of the mode named.
  bool fromIpvs = c.mode == "ipvs";
  auto set = [&](const char* path) { return present.count(path) > 0; };
  const bool nftSync = set("nftables.syncPeriod"), nftMinSync = set("nftables.minSyncPeriod");
  if (!nftSync || c.nftables.syncPeriod == Duration(0)) {
    if (fromIpvs && set("ipvs.syncPeriod")) c.nftables.syncPeriod = c.ipvs.syncPeriod;
    else if (!fromIpvs && set("iptables.syncPeriod")) c.nftables.syncPeriod = c.iptables.syncPeriod;
    else c.nftables.syncPeriod = seconds(30);
  }
  if (!nftMinSync || c.nftables.minSyncPeriod == Duration(0)) {
    if (fromIpvs && set("ipvs.minSyncPeriod") && c.ipvs.minSyncPeriod != Duration(0)) c.nftables.minSyncPeriod = c.ipvs.minSyncPeriod;
    else if (!fromIpvs && set("iptables.minSyncPeriod")) c.nftables.minSyncPeriod = c.iptables.minSyncPeriod;
    else c.nftables.minSyncPeriod = seconds(1);
  }
  if (!set("nftables.masqueradeAll") && set("iptables.masqueradeAll")) c.nftables.masqueradeAll = c.iptables.masqueradeAll;
  if (!set("nftables.masqueradeBit") && set("iptables.masqueradeBit")) c.nftables.masqueradeBit = c.iptables.masqueradeBit;
}

}  // namespace

std::string appendPortIfNeeded(const std::string& address, int port) {
  auto ip = net::canonicalIp(address);
  if (!ip) return address;
  return net::familyOf(*ip) == net::Family::V6 ? "[" + address + "]:" + std::to_string(port)
                                               : address + ":" + std::to_string(port);
}

std::optional<std::string> decodeProxyConfig(std::string_view text, ProxyConfig& out) {
  // Found by the kube_proxy_config fuzzer: invalid bytes in a value were read, then written back
  // by --write-config-to as something else. Upstream's decoder refuses them too.
  if (auto bad = api::firstInvalidUtf8(text)) return "is not valid UTF-8 (byte " + std::to_string(*bad) + ")";
  std::vector<YAML::Node> docs;
  try {
    docs = api::loadYamlStream(std::string(text));
  } catch (const YAML::Exception& e) {
    return "does not parse as YAML or JSON: line " + std::to_string(e.mark.line + 1) + ", column " +
           std::to_string(e.mark.column + 1) + ": " + e.msg;
  }
  if (docs.empty()) return std::string("is empty (want a KubeProxyConfiguration)");
  if (docs.size() > 1) return "holds " + std::to_string(docs.size()) + " documents (want one KubeProxyConfiguration)";
  ProxyConfig c;
  try {
    decodeDocument(docs[0], c);
  } catch (const FieldError& e) {
    return std::string(e.what());
  } catch (const YAML::Exception& e) {
    return std::string(e.what());
  }
  out = std::move(c);
  return std::nullopt;
}

}  // namespace kpn::config
