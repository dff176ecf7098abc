#include "nft/fake.h"

namespace kpn::nft {

namespace {

std::string tableKey(Family f, const std::string& name) { return std::string(familyName(f)) + " " + name; }

RunResult fail(const std::string& what) { return {false, "Error: Could not process rule: " + what}; }

bool chainReferenced(const FakeRunner::FakeTable& t, const std::string& chain) {
  for (const auto& [name, rules] : t.rules)
    for (const Rule& r : rules)
      for (const auto& ref : r.chainRefs)
        if (ref == chain) return true;
  for (const auto& [name, s] : t.sets)
    for (const auto& [key, v] : s.elements)
      for (const auto& ref : v.second)
        if (ref == chain) return true;
  return false;
}

bool setReferenced(const FakeRunner::FakeTable& t, const std::string& set) {
  for (const auto& [name, rules] : t.rules)
    for (const Rule& r : rules)
      for (const auto& ref : r.setRefs)
        if (ref == set) return true;
  return false;
}

}  // namespace

RunResult FakeRunner::apply(std::map<std::string, FakeTable>& tables, const Op& op) const {
  std::string tk = tableKey(op.family, op.table);
  if (unsupportedFamilies.count(op.family)) return fail("Address family not supported by protocol");
  if (op.kind == Kind::Chain && op.verb == Verb::Add && rejectChains.count(op.name))
    return fail("Operation not supported (injected for chain " + op.name + ")");
  if (op.kind == Kind::Table) {
    if (op.verb == Verb::Add) tables[tk];
    else if (!tables.count(tk)) return fail("No such file or directory (table " + tk + ")");
    else if (op.verb == Verb::Flush) {
      for (auto& [name, rules] : tables[tk].rules) rules.clear();  // as the kernel: sets keep their elements
    } else {
      tables.erase(tk);
    }
    return {};
  }
  auto ti = tables.find(tk);
  if (ti == tables.end()) return fail("No such file or directory (table " + tk + ")");
  FakeTable& t = ti->second;
  switch (op.kind) {
    case Kind::Chain: {
      auto c = t.chains.find(op.name);
      if (op.verb == Verb::Add) {
        if (c != t.chains.end() && !(c->second == op.hookValue())) return fail("File exists (chain " + op.name + ")");
        t.chains[op.name] = op.hookValue();
        t.rules[op.name];
      } else if (c == t.chains.end()) {
        return fail("No such file or directory (chain " + op.name + ")");
      } else if (op.verb == Verb::Flush) {
        t.rules[op.name].clear();
      } else {
        if (!t.rules[op.name].empty() || chainReferenced(t, op.name)) return fail("Device or resource busy (chain " + op.name + ")");
        t.chains.erase(c);
        t.rules.erase(op.name);
      }
      return {};
    }
    case Kind::Rule: {
      if (!t.chains.count(op.name)) return fail("No such file or directory (chain " + op.name + ")");
      for (const auto& ref : op.rule().chainRefs)
        if (!t.chains.count(ref)) return fail("No such file or directory (jump to " + ref + ")");
      for (const auto& ref : op.rule().setRefs)
        if (!t.sets.count(ref)) return fail("No such file or directory (set " + ref + ")");
      t.rules[op.name].push_back(op.rule());
      return {};
    }
    case Kind::Set: {
      auto s = t.sets.find(op.name);
      if (op.verb == Verb::Add) {
        if (s != t.sets.end()) {
          if (!(s->second.decl == *op.set())) return fail("File exists (set " + op.name + ")");
          return {};
        }
        t.sets[op.name].decl = *op.set();
      } else if (s == t.sets.end()) {
        return fail("No such file or directory (set " + op.name + ")");
      } else if (op.verb == Verb::Flush) {
        s->second.elements.clear();
      } else if (setReferenced(t, op.name)) {
        return fail("Device or resource busy (set " + op.name + ")");
      } else {
        t.sets.erase(s);
      }
      return {};
    }
    case Kind::Element: {
      auto s = t.sets.find(op.name);
      if (s == t.sets.end()) return fail("No such file or directory (set " + op.name + ")");
      const Element& e = op.element();
      auto have = s->second.elements.find(std::string(e.key()));
      std::string value(e.value());
      if (op.verb == Verb::Add) {
        if (refusesElement(e)) return fail("File exists (injected for element " + e.keyText() + " of " + std::string(e.comment()) + ")");
        std::vector<std::string> chainRefs = e.chainRefs();
        for (const auto& ref : chainRefs)
          if (!t.chains.count(ref)) return fail("No such file or directory (goto " + ref + ")");
        if (have != s->second.elements.end() && have->second.first != value)
          return fail("File exists (element " + e.keyText() + " in " + op.name + ")");
        // As the kernel: re-adding an element that exists keeps it as it is (its comment too).
        if (have == s->second.elements.end() && !e.comment().empty()) s->second.comments[std::string(e.key())] = e.comment();
        s->second.elements[std::string(e.key())] = {value, std::move(chainRefs)};
      } else {
        if (have == s->second.elements.end())
          return fail("No such file or directory (element " + e.keyText() + " in " + op.name + ")");
        s->second.elements.erase(have);
        s->second.comments.erase(std::string(e.key()));
      }
      return {};
    }
    case Kind::Table:
      break;
  }
  return {};
}

bool FakeRunner::refusesElement(const Element& e) const {
  for (const auto& svc : rejectServiceElements)
    if (e.comment() == svc || e.comment().compare(0, svc.size() + 1, svc + ":") == 0) return true;
  return false;
}

RunResult FakeRunner::commit(const Transaction& txn) {
  if (txn.empty()) return {};
  lastOps = txn.size();
  if (failNext || failAlways) {
    failNext = false;
    return fail("Operation not permitted (injected)");
  }
  auto next = tables;  // atomic: all or nothing
  RunResult r = applyAll(txn, next);
  if (!r.ok) return r;
  tables = std::move(next);
  ++commits;
  RunResult done;
  done.generation = ++gen;
  noteChange(gen - 1, gen);
  return done;
}

std::optional<uint32_t> FakeRunner::generation(std::string* error) {
  ++fingerprintReads;
  if (fingerprintFails) return *error = "Too many open files (injected)", std::nullopt;
  return gen;
}

std::optional<std::map<TableId, TableCounts>> FakeRunner::tableCounts(const std::vector<TableId>& ids, std::string* error) {
  if (fingerprintFails) return *error = "Too many open files (injected)", std::nullopt;
  std::map<TableId, TableCounts> out;
  for (const auto& id : ids) {
    auto t = tables.find(tableKey(id.first, id.second));
    out[id] = t == tables.end() ? TableCounts{} : TableCounts{t->second.chains.size(), t->second.sets.size()};
  }
  return out;
}

RunResult FakeRunner::applyAll(const Transaction& txn, std::map<std::string, FakeTable>& tables) const {
  for (const Op& op : txn.ops()) {
    RunResult r = apply(tables, op);
    if (!r.ok) return r;
  }
  return {};
}

RunResult FakeRunner::check(const Transaction& txn) {
  ++checks;
  if (txn.empty()) return {};
  auto scratch = tables;
  return applyAll(txn, scratch);
}

RunResult FakeRunner::probeFamily(Family f) {
  if (unsupportedFamilies.count(f)) return fail("Address family not supported by protocol");
  return {};
}

// As the kernel: a transaction of `add` commands, a new generation even when everything existed.
RunResult FakeRunner::declareStatic(const Ruleset& rs) {
  for (const Table& t : rs.tables) {
    FakeTable& ft = tables[tableKey(t.family, t.name)];
    for (const SetDecl& d : t.sets)
      if (!d.typeofSpec.empty() && !ft.sets.count(d.name)) ft.sets[d.name].decl = d;
    ft.counters.insert(t.counters.begin(), t.counters.end());
  }
  ++declarations;
  RunResult done;
  done.generation = ++gen;
  noteChange(gen - 1, gen);
  return done;
}

RunResult FakeRunner::list(Family f, const std::string& table, ListedTable* out) {
  *out = ListedTable{};
  auto ti = tables.find(tableKey(f, table));
  if (ti == tables.end()) return {};
  out->exists = true;
  out->counters.insert(ti->second.counters.begin(), ti->second.counters.end());
  for (const auto& [name, hook] : ti->second.chains) {
    ListedChain& lc = out->chains[name];
    lc.hook = hook;
    for (const Rule& r : ti->second.rules.at(name)) lc.rules.push_back(listedRule(r.exprJson, r.comment));
  }
  for (const auto& [name, s] : ti->second.sets) {
    ListedSet& ls = out->sets[name];
    ls.isMap = !s.decl.dataType.empty() || (!s.decl.typeofSpec.empty() && !s.decl.dynamic);
    ls.keyType = s.decl.typeofSpec.empty() ? s.decl.keyType : std::vector<std::string>{"integer"};
    ls.dataType = s.decl.dataType;
    ls.interval = s.decl.interval;
    for (const auto& [key, v] : s.elements) ls.elements[key] = v.first;
    for (const auto& [key, c] : s.comments) ls.comments[key] = c;
  }
  return {};
}

RunResult FakeRunner::deleteTable(Family f, const std::string& table) {
  tables.erase(tableKey(f, table));
  return {};
}

}  // namespace kpn::nft
