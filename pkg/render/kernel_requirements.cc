#include "pkg/render/kernel_requirements.h"

#include <optional>
#include <string>
#include <utility>

#include "nft/expr.h"
#include "nft/model.h"

namespace kpn::render {

namespace {

using nft::Family;
using nft::ProbeObjects;
namespace ex = nft::ex;
namespace st = nft::st;

// Documentation addresses (RFC 5737, RFC 3849): a rule that names one never matches anything here.
std::string testAddress(Family f) { return f == Family::IPv4 ? "192.0.2.1" : "2001:db8::1"; }

ProbeObjects rules(std::vector<nft::Rule> r) { return ProbeObjects{{}, {}, std::move(r)}; }

}  // namespace

const std::vector<nft::Requirement>& rulesetRequirements() {
  static const std::vector<nft::Requirement> reqs = {
      {"nf_tables", "nf_tables", nullptr},  // the scratch table and its filter chain
      {"ct", "nft_ct, nf_conntrack",
       [](Family) {
         return rules({nft::makeRule({st::match(ex::ct("state"), "in", ex::symbol("new"))}),
                       nft::makeRule({st::match(ex::ct("status"), "in", ex::symbol("dnat"))})});
       }},
      {"nat", "nft_chain_nat, nft_nat",
       [](Family f) {
         nft::Chain dnat{"dnat", nft::Hook{"nat", "prerouting", -100},
                         {nft::makeRule({st::match(ex::meta("l4proto"), "==", ex::symbol("tcp")),
                                         st::dnatTo(f, testAddress(f), 80)})}};
         return ProbeObjects{{}, {dnat}, {}};
       }},
      {"masquerade", "nft_masq",
       [](Family) {
         nft::Chain snat{"snat", nft::Hook{"nat", "postrouting", 100}, {nft::makeRule({st::masqueradeFullyRandom()})}};
         return ProbeObjects{{}, {snat}, {}};
       }},
      {"numgen", "nft_numgen",
       [](Family) {
         nft::Chain target{"numgen-target", std::nullopt, {}};
         return ProbeObjects{{}, {target}, {nft::makeRule({st::numgenGoto({target.name, target.name})})}};
       }},
      {"concatenated verdict maps", "nf_tables (concatenations, kernel >= 4.15)",
       [](Family f) {
         nft::SetDecl services{"services", {nft::addrTypeName(f), "inet_proto", "inet_service"}, "verdict", "", false};
         nft::Expr key =
             ex::concat({ex::payload(nft::familyName(f), "daddr"), ex::meta("l4proto"), ex::payload("th", "dport")});
         return ProbeObjects{{services}, {}, {nft::makeRule({st::vmap(key, services.name)})}};
       }},
      {"concatenated interval sets", "nf_tables (pipapo set backend, kernel >= 5.6)",
       [](Family f) {
         // loadBalancerSourceRanges (@firewall-allow): destination . proto . port . source range.
         const std::string addr = nft::addrTypeName(f);
         nft::SetDecl allow{"allow", {addr, "inet_proto", "inet_service", addr}, "", "", false};
         allow.interval = true;
         nft::Expr key = ex::concat({ex::payload(nft::familyName(f), "daddr"), ex::meta("l4proto"),
                                     ex::payload("th", "dport"), ex::payload(nft::familyName(f), "saddr")});
         return ProbeObjects{{allow}, {}, {nft::makeRule({st::matchSet(key, allow.name, /*negate=*/true), st::drop()})}};
       }},
      {"fib", "nft_fib_ipv4, nft_fib_ipv6",
       [](Family) { return rules({nft::makeRule({st::match(ex::fib("daddr", "type"), "==", ex::symbol("local"))})}); }},
      {"reject", "nft_reject_ipv4, nft_reject_ipv6",
       [](Family f) { return rules({nft::makeRule({st::reject(f)})}); }},
      {"dynamic sets with timeouts", "nf_tables (set timeouts), nft_dynset",
       [](Family f) {
         nft::SetDecl affinity{"affinity", {nft::addrTypeName(f)}, "", "", true};
         nft::Stmt update = st::setUpdate(ex::payload(nft::familyName(f), "saddr"), 10800, affinity.name);
         return ProbeObjects{{affinity}, {}, {nft::makeRule({update})}};
       }},
  };
  return reqs;
}

}  // namespace kpn::render
