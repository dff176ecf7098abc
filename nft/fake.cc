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

RunResult FakeRunner::apply(std::map<std::string, FakeTable>& tables, const Op& op) {
  std::string tk = tableKey(op.family, op.table);
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
          if (!(s->second.decl == *op.set)) return fail("File exists (set " + op.name + ")");
          return {};
        }
        t.sets[op.name].decl = *op.set;
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
      auto have = s->second.elements.find(e.key);
      const std::string& value = e.value;
      if (op.verb == Verb::Add) {
        std::vector<std::string> chainRefs = e.chainRefs();
        for (const auto& ref : chainRefs)
          if (!t.chains.count(ref)) return fail("No such file or directory (goto " + ref + ")");
        if (have != s->second.elements.end() && have->second.first != value)
          return fail("File exists (element " + e.keyText() + " in " + op.name + ")");
        // As the kernel: re-adding an element that exists keeps it as it is (its comment too).
        if (have == s->second.elements.end() && !e.comment.empty()) s->second.comments[e.key] = e.comment;
        s->second.elements[e.key] = {value, std::move(chainRefs)};
      } else {
        if (have == s->second.elements.end())
          return fail("No such file or directory (element " + e.keyText() + " in " + op.name + ")");
        s->second.elements.erase(have);
        s->second.comments.erase(e.key);
      }
      return {};
    }
    case Kind::Table:
      break;
  }
  return {};
}

RunResult FakeRunner::commit(const Transaction& txn) {
  if (txn.empty()) return {};
  lastOps = txn.size();
  if (failNext || failAlways) {
    failNext = false;
    return fail("Operation not permitted (injected)");
  }
  auto next = tables;  // atomic: all or nothing
  for (const Op& op : txn.ops()) {
    RunResult r = apply(next, op);
    if (!r.ok) return r;
  }
  tables = std::move(next);
  ++commits;
  return {};
}

RunResult FakeRunner::declareStatic(const Ruleset& rs) {
  for (const Table& t : rs.tables) {
    FakeTable& ft = tables[tableKey(t.family, t.name)];
    for (const SetDecl& d : t.sets)
      if (!d.typeofSpec.empty() && !ft.sets.count(d.name)) ft.sets[d.name].decl = d;
  }
  return {};
}

RunResult FakeRunner::list(Family f, const std::string& table, ListedTable* out) {
  *out = ListedTable{};
  auto ti = tables.find(tableKey(f, table));
  if (ti == tables.end()) return {};
  out->exists = true;
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
