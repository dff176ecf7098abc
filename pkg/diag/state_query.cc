#include "pkg/diag/state_query.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "nft/json_text.h"
#include "pkg/diag/json_fields.h"
#include "pkg/api/validate.h"
#include "pkg/net/ip.h"

namespace kpn::diag {

using json::member;
using json::str;

namespace {

using nft::jsonString;

std::string serialize(const rapidjson::Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

}  // namespace

std::string queryLine(const StateQuery& q) {
  switch (q.kind) {
    case StateQuery::Kind::Status:
      return "{\"query\":\"status\"}";
    case StateQuery::Kind::Service:
      return "{\"query\":\"service\",\"namespace\":" + jsonString(q.ns) + ",\"name\":" + jsonString(q.name) + "}";
    case StateQuery::Kind::Address:
      return "{\"query\":\"address\",\"ip\":" + jsonString(q.ip) + ",\"port\":" + std::to_string(q.port) +
             ",\"protocol\":" + jsonString(q.protocol) + "}";
  }
  return "";
}

std::optional<StateQuery> parseQuery(const std::string& line, std::string* error) {
  rapidjson::Document d;
  d.Parse(line.c_str(), line.size());
  if (d.HasParseError() || !d.IsObject()) {
    *error = "the request is not a JSON object";
    return std::nullopt;
  }
  StateQuery q;
  std::string kind = str(d, "query");
  if (kind == "status") return q;
  if (kind == "service") {
    q.kind = StateQuery::Kind::Service;
    q.ns = str(d, "namespace");
    q.name = str(d, "name");
    if (!api::isDns1123Label(q.ns) || !api::isDns1123Label(q.name)) {
      *error = "namespace and name must be DNS-1123 labels";
      return std::nullopt;
    }
    return q;
  }
  if (kind == "address") {
    q.kind = StateQuery::Kind::Address;
    auto ip = net::canonicalIp(str(d, "ip"));
    const auto* port = member(d, "port");
    q.protocol = str(d, "protocol");
    if (!ip || !port || !port->IsUint() || port->GetUint() > 65535 ||
        (q.protocol != "tcp" && q.protocol != "udp" && q.protocol != "sctp")) {
      *error = "an address question needs ip, port (0..65535) and protocol (tcp, udp, sctp)";
      return std::nullopt;
    }
    q.ip = *ip;
    q.port = static_cast<uint16_t>(port->GetUint());
    return q;
  }
  *error = "unknown query \"" + kind + "\" (status, service, address)";
  return std::nullopt;
}

std::string stateAnswerJson(const std::string& statusJson, const std::string& configYaml, const std::string& nodeName,
                            const std::vector<std::string>& objectsJson, const std::optional<std::string>& excludedJson,
                            const std::string& excludedLookupError) {
  std::string out = "{\"status\":" + statusJson + ",\"config\":" + jsonString(configYaml) +
                    ",\"nodeName\":" + jsonString(nodeName) + ",\"objects\":[";
  for (size_t i = 0; i < objectsJson.size(); ++i) out += (i ? "," : "") + objectsJson[i];
  out += "],\"excluded\":" + (excludedJson ? *excludedJson : std::string("null")) +
         ",\"excludedLookupError\":" + jsonString(excludedLookupError) + "}";
  return out;
}

std::optional<StateAnswer> parseStateAnswer(const std::string& text, std::string* error) {
  rapidjson::Document d;
  if (!json::parseAnswer(d, text, error)) return std::nullopt;
  const auto* status = member(d, "status");
  const auto* objects = member(d, "objects");
  if (!status || !objects || !objects->IsArray()) {
    *error = "the daemon's answer is not a state answer";
    return std::nullopt;
  }
  StateAnswer a;
  a.status = statusFromJson(*status);
  a.configYaml = str(d, "config");
  a.nodeName = str(d, "nodeName");
  a.excludedLookupError = str(d, "excludedLookupError");
  // The objects through the manifest decoder: validated as if read from a file.
  rapidjson::Document list;
  list.SetObject();
  list.AddMember("kind", "List", list.GetAllocator());
  list.AddMember("apiVersion", "v1", list.GetAllocator());
  rapidjson::Value items;
  items.CopyFrom(*objects, list.GetAllocator());
  list.AddMember("items", items, list.GetAllocator());
  std::string syntax;
  if (!api::decodeManifest(serialize(list), true, a.objects, &syntax)) {
    *error = "the daemon's objects do not decode: " + syntax;
    return std::nullopt;
  }
  if (const auto* ex = member(d, "excluded")) {
    api::DecodedObjects one;
    if (api::decodeManifest(serialize(*ex), true, one, &syntax) && one.services.size() == 1)
      a.excluded = std::move(one.services.front());
  }
  return a;
}

}  // namespace kpn::diag
