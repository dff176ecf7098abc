// libnftables 1.0.6 fills its cache from every table of the network namespace, not only the
// tables a command names: a CNI's table with 10 000 chains made each of our commits 100-200 ms
// slower here (element-only and rule commits alike; a trailing scoped `list` command does not
// help once the transaction spans both families). The scope hides every other table from
// libnftables in this process: it interposes the libnftnl parsers that libnftables calls for each
// object of a dump (tables, chains, sets, rules, objects, flowtables) and rejects, before parsing,
// objects of tables outside the scope. libnftables skips objects whose parse fails, so other
// agents' tables never enter its cache: their size costs only the kernel's dump, and their
// contents (sets written by a newer nft) are never interpreted. For our own tables everything is
// as before. Process-wide: set it once, in the process that talks to libnftables, before its first
// command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct nlmsghdr;

namespace kpn::nft {

struct ScopedTable {
  uint8_t family;  // NFPROTO_IPV4, NFPROTO_IPV6, ...
  std::string name;
};

// Empty: no scope, libnftables sees everything (the default).
void setCacheScope(std::vector<ScopedTable> tables);
const std::vector<ScopedTable>& cacheScope();

// Whether an nf_tables netlink message (a table, chain, set, rule, object or flowtable, whose
// table name is attribute 1 in every one of them) belongs to a table of `scope`. Messages it
// cannot read are in scope: libnftables then decides as it always did.
bool messageInScope(const nlmsghdr* nlh, const std::vector<ScopedTable>& scope);

// True when the dynamic linker resolves the interposed parsers to ours.
bool cacheScopeActive();

}  // namespace kpn::nft
