#include "pkg/trace/drift.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <map>
#include <set>

#include "nft/json_read.h"

namespace kpn::trace {

namespace {

bool names(std::string_view comment, const std::string& service) {
  return comment == service || comment.rfind(service + ":", 0) == 0;
}

// A slot's destination: its key's concatenation without the slot, written compactly
// ({"concat":["10.96.0.10",80,3]} -> ["10.96.0.10",80]), so that a key the kernel lists spelled
// otherwise names the same destination. Only a destination's first slot carries the service
// port's comment (render/service_dispatch.cc); the others are known by this. "" for a key that
// is not a concatenation.
std::string destinationOf(std::string_view key) {
  // Drift reads every slot of the table: a key's tree fits this buffer, and costs no pool chunk.
  char pool[512];
  rapidjson::MemoryPoolAllocator<> allocator(pool, sizeof pool);
  rapidjson::Document doc(&allocator);
  if (!nft::readJson(key, doc) || !doc.IsObject() || doc.MemberCount() != 1) return "";
  auto concat = doc.FindMember("concat");
  if (concat == doc.MemberEnd() || !concat->value.IsArray() || concat->value.Size() < 2) return "";
  concat->value.PopBack();
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  concat->value.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string elementText(const std::string& set, const std::string& key, const std::string& value) {
  nft::Element e(set, key, value);
  return "@" + set + " " + e.keyText() + (value.empty() ? "" : " : " + e.valueText());
}

}  // namespace

Drift serviceDrift(const nft::ListedTable& live, const nft::Table& desired, const std::string& service) {
  // set -> key -> value, the service's elements on each side
  std::map<std::string, std::map<std::string, std::string>> want, have;
  std::map<std::string, std::vector<std::string>> wantChains;  // chain -> rules' expression JSON
  // The elements that name the service, then the uncommented slots of the destinations they
  // name: only a destination's slot 0 carries the comment (render/service_dispatch.cc).
  std::map<std::string, std::set<std::string>> named;  // set -> destinations of elements naming it
  for (const auto& [owner, part] : desired.parts) {
    if (!part) continue;
    for (const auto& e : part->elements)
      if (names(e.comment(), service)) {
        want[e.set.str()][std::string(e.key())] = std::string(e.value());
        if (std::string d = destinationOf(e.key()); !d.empty()) named[e.set.str()].insert(d);
      }
    if (owner == "svc " + service)
      for (const auto& c : part->chains) {
        auto& rules = wantChains[c.name];
        for (const auto& r : c.rules) rules.push_back(r.exprJson);
      }
  }
  for (const auto& [owner, part] : desired.parts) {
    if (!part) continue;
    for (const auto& e : part->elements) {
      auto ds = named.find(e.set.str());
      if (e.comment().empty() && ds != named.end() && ds->second.count(destinationOf(e.key())))
        want[e.set.str()][std::string(e.key())] = std::string(e.value());
    }
  }
  for (const auto& [set, s] : live.sets) {
    // The service's destinations in this set: those of its wanted elements and of the kernel's
    // elements that name it; an element without a comment is the service's when it is a slot
    // of one of them.
    std::set<std::string> destinations;
    if (auto ws = want.find(set); ws != want.end())
      for (const auto& [key, value] : ws->second) destinations.insert(destinationOf(key));
    for (const auto& [key, comment] : s.comments)
      if (names(comment, service)) {
        auto v = s.elements.find(key);
        have[set][key] = v == s.elements.end() ? "" : v->second;
        destinations.insert(destinationOf(key));
      }
    destinations.erase("");
    if (destinations.empty()) continue;
    for (const auto& [key, value] : s.elements)
      if (!s.comments.count(key) && destinations.count(destinationOf(key))) have[set][key] = value;
  }
  Drift d;
  for (const auto& [set, elems] : want)
    for (const auto& [key, value] : elems) {
      const std::string* listed = nullptr;
      if (auto hs = have.find(set); hs != have.end())
        if (auto hv = hs->second.find(key); hv != hs->second.end()) listed = &hv->second;
      if (!listed) d.missing.push_back(elementText(set, key, value));
      else if (*listed != value)
        d.unexpected.push_back(elementText(set, key, *listed) + " (the state says " + elementText(set, key, value) + ")");
    }
  for (const auto& [set, elems] : have)
    for (const auto& [key, value] : elems) {
      auto ws = want.find(set);
      if (ws == want.end() || !ws->second.count(key)) d.unexpected.push_back(elementText(set, key, value));
    }
  for (const auto& [name, rules] : wantChains) {
    auto it = live.chains.find(name);
    if (it == live.chains.end()) {
      d.missing.push_back("chain " + name);
      continue;
    }
    std::vector<std::string> listed;
    for (const auto& r : it->second.rules) listed.push_back(r.exprJson);
    if (listed != rules)
      d.unexpected.push_back("chain " + name + " (" + std::to_string(listed.size()) + " rules in the kernel, " +
                             std::to_string(rules.size()) + " in the state's table, or different ones)");
  }
  // Chains of the service's own in the kernel that the state does not have.
  for (const auto& [name, chain] : live.chains)
    if (name.rfind("affinity-" + service + "/", 0) == 0 && !wantChains.count(name))
      d.unexpected.push_back("chain " + name);
  return d;
}

}  // namespace kpn::trace
