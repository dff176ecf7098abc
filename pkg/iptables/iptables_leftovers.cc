#include "pkg/iptables/iptables_leftovers.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <set>
#include <sstream>

#include "nft/json_read.h"
#include "nft/json_text.h"

namespace kpn::iptables {

namespace {

constexpr std::string_view kFixedChains[] = {
    "KUBE-SERVICES",  "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS",      "KUBE-POSTROUTING",
    "KUBE-MARK-MASQ", "KUBE-FORWARD",           "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY",
};
constexpr std::string_view kChainPrefixes[] = {"KUBE-SVC-", "KUBE-SVL-", "KUBE-SEP-", "KUBE-FW-", "KUBE-EXT-",
                                               "KUBE-XLB-"};

// Upstream's iptablesJumpChains (pkg/proxy/iptables/proxier.go): table, built-in chain, target.
// Plus filter INPUT -> KUBE-SERVICES, which 1.13 to 1.19 added (iptablesCleanupOnlyChains then).
struct JumpRule {
  std::string_view table, chain, target;
};
constexpr JumpRule kUpstreamJumps[] = {
    {"filter", "INPUT", "KUBE-EXTERNAL-SERVICES"}, {"filter", "FORWARD", "KUBE-EXTERNAL-SERVICES"},
    {"filter", "INPUT", "KUBE-NODEPORTS"},         {"filter", "FORWARD", "KUBE-SERVICES"},
    {"filter", "OUTPUT", "KUBE-SERVICES"},         {"filter", "FORWARD", "KUBE-FORWARD"},
    {"filter", "INPUT", "KUBE-PROXY-FIREWALL"},    {"filter", "OUTPUT", "KUBE-PROXY-FIREWALL"},
    {"filter", "FORWARD", "KUBE-PROXY-FIREWALL"},  {"nat", "OUTPUT", "KUBE-SERVICES"},
    {"nat", "PREROUTING", "KUBE-SERVICES"},        {"nat", "POSTROUTING", "KUBE-POSTROUTING"},
    {"filter", "INPUT", "KUBE-SERVICES"},
};

// {"<verb>":{"<kind>":{"family":..,"table":..,"name"|"chain":..,["handle":..]}}} with every
// string escaped by the JSON writer (names come from the kernel, i.e. from whoever made them).
std::string command(const char* verb, const char* kind, const IptablesChain& c,
                    std::optional<int64_t> handle = std::nullopt) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key(verb);
  w.StartObject();
  w.Key(kind);
  w.StartObject();
  w.Key("family");
  w.String(c.family.c_str(), c.family.size());
  w.Key("table");
  w.String(c.table.c_str(), c.table.size());
  w.Key(handle ? "chain" : "name");
  w.String(c.name.c_str(), c.name.size());
  if (handle) {
    w.Key("handle");
    w.Int64(*handle);
  }
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

// The tables iptables-nft makes (upstream's proxier uses these three).
bool isIptablesNftTable(const IptablesChain& c) {
  return (c.family == "ip" || c.family == "ip6") && (c.table == "nat" || c.table == "filter" || c.table == "mangle");
}

std::string str(const rapidjson::Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

// Whether a rule carries iptables' comment match (upstream comments each of its jump rules).
bool hasCommentMatch(const rapidjson::Value& expr) {
  if (!expr.IsArray()) return false;
  for (const auto& e : expr.GetArray()) {
    if (!e.IsObject()) continue;
    auto xt = e.FindMember("xt");
    if (xt != e.MemberEnd() && xt->value.IsObject() && str(xt->value, "type") == "match" &&
        str(xt->value, "name") == "comment")
      return true;
  }
  return false;
}

// The chain a rule's jump or goto verdict names, if any (iptables-nft writes `-j CHAIN` as a
// native verdict at the rule's top level).
std::optional<std::string> verdictTarget(const rapidjson::Value& expr) {
  if (!expr.IsArray()) return std::nullopt;
  for (const auto& e : expr.GetArray()) {
    if (!e.IsObject()) continue;
    for (const char* v : {"jump", "goto"}) {
      auto it = e.FindMember(v);
      if (it != e.MemberEnd() && it->value.IsObject()) {
        std::string target = str(it->value, "target");
        if (!target.empty()) return target;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

bool isUpstreamIptablesChain(std::string_view name) {
  for (auto c : kFixedChains)
    if (name == c) return true;
  for (auto p : kChainPrefixes)
    if (name.size() > p.size() && name.substr(0, p.size()) == p) return true;
  return false;
}

bool isUpstreamJumpRule(std::string_view table, std::string_view chain, std::string_view target) {
  for (const JumpRule& j : kUpstreamJumps)
    if (j.table == table && j.chain == chain && j.target == target) return true;
  return false;
}

bool addIptablesListing(const std::string& listingJson, IptablesCleanupPlan* plan, std::string* error) {
  rapidjson::Document doc;
  if (!nft::readJson(listingJson, doc) || !doc.IsObject() || !doc.HasMember("nftables") || !doc["nftables"].IsArray()) {
    if (error) *error = "unreadable nft listing";
    return false;
  }
  IptablesCleanupPlan next = *plan;
  for (const auto& item : doc["nftables"].GetArray()) {
    if (!item.IsObject()) continue;
    if (item.HasMember("chain") && item["chain"].IsObject()) {
      const auto& c = item["chain"];
      IptablesChain chain{str(c, "family"), str(c, "table"), str(c, "name")};
      if (!isIptablesNftTable(chain) || !next.seen.insert(chain).second) continue;
      if (!isUpstreamIptablesChain(chain.name)) {
        next.otherChains.push_back(chain);
        continue;
      }
      next.upstreamChains.push_back(chain);
    } else if (item.HasMember("rule") && item["rule"].IsObject()) {
      const auto& r = item["rule"];
      IptablesChain chain{str(r, "family"), str(r, "table"), str(r, "chain")};
      // Rules inside upstream's chains go with their chain's flush.
      if (!isIptablesNftTable(chain) || isUpstreamIptablesChain(chain.name) || !r.HasMember("expr") ||
          !r.HasMember("handle") || !r["handle"].IsInt64())
        continue;
      auto target = verdictTarget(r["expr"]);
      if (!target || !isUpstreamIptablesChain(*target)) continue;
      if (!isUpstreamJumpRule(chain.table, chain.name, *target) || !hasCommentMatch(r["expr"])) {
        next.referenced.insert({chain.family, chain.table, *target});  // someone else's: it stays
        continue;
      }
      std::string del = command("delete", "rule", chain, r["handle"].GetInt64());
      if (!next.seenRules.insert(del).second) continue;
      next.ruleDeletes.push_back(std::move(del));
      ++next.jumpRules;
    }
  }
  *plan = std::move(next);
  return true;
}

IptablesCleanupCommands cleanupCommands(const IptablesCleanupPlan& plan) {
  IptablesCleanupCommands out;
  out.ruleDeletes = plan.ruleDeletes;
  for (const IptablesChain& c : plan.upstreamChains) {
    const bool kept = plan.referenced.count(c) > 0;
    if (kept) out.kept.push_back(c);
    if (kept && c.name == "KUBE-MARK-MASQ") continue;
    out.chainFlushes.push_back(command("flush", "chain", c));
    if (!kept) out.chainDeletes.push_back(command("delete", "chain", c));
  }
  return out;
}

std::string cleanupTransactionJson(const IptablesCleanupPlan& plan) {
  const IptablesCleanupCommands cmds = cleanupCommands(plan);
  std::string out = "{\"nftables\":[";
  bool first = true;
  for (const auto* part : {&cmds.ruleDeletes, &cmds.chainFlushes, &cmds.chainDeletes})
    for (const auto& c : *part) {
      if (!first) out += ',';
      first = false;
      out += c;
    }
  return out + "]}";
}

std::string listChainsCommand(const std::string& family) {
  return "{\"nftables\":[{\"list\":{\"chains\":{\"family\":" + nft::jsonString(family) + "}}}]}";
}

std::string listChainCommand(const IptablesChain& chain) {
  return "{\"nftables\":[" + command("list", "chain", chain) + "]}";
}

std::optional<std::string> legacyIptablesReport(
    const std::function<std::optional<std::string>(const char*)>& readFile) {
  std::ostringstream tables;
  bool any = false;
  for (const auto& [path, tool] : {std::pair{"/proc/net/ip_tables_names", "iptables-legacy"},
                                   std::pair{"/proc/net/ip6_tables_names", "ip6tables-legacy"}}) {
    auto text = readFile(path);
    if (!text) continue;
    std::istringstream in(*text);
    std::string name;
    std::set<std::string> names;
    while (in >> name) names.insert(name);
    if (names.empty()) continue;
    tables << (any ? "; " : "") << tool << ":";
    for (const auto& n : names) tables << " " << n;
    any = true;
  }
  if (!any) return std::nullopt;
  return "iptables-legacy (x_tables) tables exist in this network namespace (" + tables.str() +
         "); nftables cannot see or change them, so kube-proxy-nft leaves them alone. If upstream kube-proxy "
         "ran here in iptables or IPVS mode with the legacy backend, its KUBE-* chains may still answer "
         "Service traffic: list them with `iptables-legacy-save | grep KUBE-` (and ip6tables-legacy-save) and "
         "remove them with upstream's own `kube-proxy --cleanup` run with the legacy backend "
         "(docs/migration.md)";
}

}  // namespace kpn::iptables
