#include "pkg/kube/wire.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "pkg/api/decode_json.h"

namespace kpn::kube {
namespace {

using JV = rapidjson::Value;

const JV* member(const JV& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

std::string str(const JV* v) { return v && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : ""; }

// Annotations the proxy reads; the rest (kubectl's last-applied-configuration can be kilobytes
// per object) is dropped so that 10k objects do not carry them in memory.
template <class T>
void keepUsefulAnnotations(T& obj) {
  auto& a = obj.meta.annotations;
  for (auto it = a.begin(); it != a.end();)
    it = it->first == kLastChangeTriggerTime ? std::next(it) : a.erase(it);
}

WireItem decodeItem(const JV& v, const std::string& kind) {
  WireItem item;
  const JV* meta = member(v, "metadata");
  std::string ns = meta ? str(member(*meta, "namespace")) : "";
  std::string name = meta ? str(member(*meta, "name")) : "";
  const bool clusterScoped = kind == "Node" || kind == "ServiceCIDR";
  if (!clusterScoped && ns.empty()) ns = "default";
  if (!name.empty()) item.key = clusterScoped ? name : ns + "/" + name;
  if (meta) item.resourceVersion = str(member(*meta, "resourceVersion"));

  api::DecodedObjects d;
  api::decodeObjectAs(v, kind, d);
  size_t n = d.services.size() + d.slices.size() + d.nodes.size() + d.serviceCIDRs.size();
  if (!d.errors.empty()) {
    item.error = d.errors.front();
  } else if (n != 1) {
    item.error = kind + " " + (item.key.empty() ? "<unnamed>" : item.key) + ": expected one " + kind + " object";
  } else if (kind == "Service" && d.services.size() == 1) {
    keepUsefulAnnotations(d.services[0]);
    item.object = std::make_shared<const api::Service>(std::move(d.services[0]));
  } else if (kind == "EndpointSlice" && d.slices.size() == 1) {
    keepUsefulAnnotations(d.slices[0]);
    if (d.slices[0].serviceName.empty())
      item.error = "EndpointSlice " + item.key + ": no kubernetes.io/service-name label";
    else
      item.object = std::make_shared<const api::EndpointSlice>(std::move(d.slices[0]));
  } else if (kind == "Node" && d.nodes.size() == 1) {
    keepUsefulAnnotations(d.nodes[0]);
    item.object = std::make_shared<const api::Node>(std::move(d.nodes[0]));
  } else if (kind == "ServiceCIDR" && d.serviceCIDRs.size() == 1) {
    keepUsefulAnnotations(d.serviceCIDRs[0]);
    item.object = std::make_shared<const api::ServiceCIDR>(std::move(d.serviceCIDRs[0]));
  } else {
    item.error = kind + " " + item.key + ": object of another kind";
  }
  return item;
}

std::optional<std::string> parse(std::string_view text, rapidjson::Document& doc) {
  // Iterative: a hostile, deeply nested document must not overflow the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc.HasParseError())
    return std::string("invalid JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()) + " at offset " +
           std::to_string(doc.GetErrorOffset());
  if (!doc.IsObject()) return std::string("not a JSON object");
  return std::nullopt;
}

}  // namespace

std::optional<std::string> decodeListPage(std::string_view body, const std::string& kind, ListPage& out) {
  // A list's DOM is ~2x its body (tens of MiB at 10k objects) and dies right after decoding: in
  // chunks of 4 MiB it comes from mmap (see the daemon's M_MMAP_THRESHOLD) and goes back to the
  // system whole, instead of leaving holes between the decoded objects that stay.
  rapidjson::MemoryPoolAllocator<> pool(size_t(4) << 20);
  rapidjson::Document doc(&pool);
  if (auto err = parse(body, doc)) return err;
  const JV* items = member(doc, "items");
  if (!items || !(items->IsArray() || items->IsNull())) return kind + "List: no items array";
  const JV* meta = member(doc, "metadata");
  out.resourceVersion = meta ? str(member(*meta, "resourceVersion")) : "";
  out.continueToken = meta ? str(member(*meta, "continue")) : "";
  if (out.resourceVersion.empty()) return kind + "List: no metadata.resourceVersion";
  if (items->IsArray()) {
    out.items.reserve(items->Size());
    for (const JV& v : items->GetArray()) out.items.push_back(decodeItem(v, kind));
  }
  return std::nullopt;
}

std::optional<std::string> decodeWatchEvent(std::string_view line, const std::string& kind, WatchEvent& out) {
  rapidjson::Document doc;
  if (auto err = parse(line, doc)) return err;
  std::string type = str(member(doc, "type"));
  const JV* obj = member(doc, "object");
  if (type.empty()) return std::string("watch event without a type");
  if (!obj || !obj->IsObject()) return "watch event " + type + " without an object";
  if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") {
    out.type = type == "ADDED" ? WatchEvent::Type::Added
               : type == "MODIFIED" ? WatchEvent::Type::Modified
                                    : WatchEvent::Type::Deleted;
    out.item = decodeItem(*obj, kind);
    if (out.item.key.empty()) return "watch event " + type + ": object has no metadata.name";
    if (out.item.resourceVersion.empty()) return "watch event " + type + " " + out.item.key + ": no resourceVersion";
    return std::nullopt;
  }
  if (type == "BOOKMARK") {
    out.type = WatchEvent::Type::Bookmark;
    const JV* meta = member(*obj, "metadata");
    out.item.resourceVersion = meta ? str(member(*meta, "resourceVersion")) : "";
    if (out.item.resourceVersion.empty()) return std::string("BOOKMARK without metadata.resourceVersion");
    return std::nullopt;
  }
  if (type == "ERROR") {
    out.type = WatchEvent::Type::Error;
    const JV* code = member(*obj, "code");
    out.errorCode = code && code->IsInt() ? code->GetInt() : 0;
    out.errorText = str(member(*obj, "reason"));
    std::string msg = str(member(*obj, "message"));
    if (!msg.empty()) out.errorText += (out.errorText.empty() ? "" : ": ") + msg;
    return std::nullopt;
  }
  return "unknown watch event type \"" + type.substr(0, 40) + "\"";
}

}  // namespace kpn::kube
