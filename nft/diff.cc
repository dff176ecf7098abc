#include "nft/diff.h"

#include <map>
#include <set>
#include <string_view>

#include "nft/desired_elements.h"

namespace kpn::nft {

std::string indexSetKey(Family f, const std::string& table, const std::string& set) {
  std::string k = familyName(f);
  k += '|';
  k += table;
  k += '|';
  k += set;
  return k;
}

namespace {

std::string indexKey(const Table& t, const std::string& set, std::string_view keyJson) {
  std::string k = indexSetKey(t.family, t.name, set);
  k += '|';
  k += keyJson;
  return k;
}

// Operations collected by phase, then joined in an order the kernel accepts: declarations before
// use, rules before elements (binding a rule to a map validates every element already in it, so a
// cold load is cheapest with rules first), element deletes before the chains they point at.
struct Phases {
  Transaction tables, dropStale, sets, addChains, flushChains, rules, delElems, addElems, delChains, delSets;
  // Moves, not copies: a cold sync carries ~240k operations at 10k services. The element adds'
  // buffer becomes the joined transaction's when it has room for every phase (reserveElementAdds);
  // each other phase's buffer goes as soon as it is moved.
  Transaction join() && {
    return Transaction::joined(
        {&tables, &dropStale, &sets, &addChains, &flushChains, &rules, &delElems, &addElems, &delChains, &delSets});
  }
  // Room in the element adds for `more` of them and for every other phase's operations, with some
  // to spare for what the plan adds to the other phases after this call (another table's
  // declarations and chains, deletes), so that join() keeps this buffer.
  void reserveElementAdds(size_t more) {
    size_t needed = addElems.size() + more;
    for (const Transaction* p : {&tables, &dropStale, &sets, &addChains, &flushChains, &rules, &delElems, &delChains,
                                 &delSets})
      needed += p->size();
    if (needed > addElems.capacity()) addElems.reserve(needed + kJoinRoom);
  }
  static constexpr size_t kJoinRoom = 4096;
};

// `owner`: the Part the chain belongs to; operations point into it instead of copying.
void addChainWithRules(Phases& ph, const Table& t, const Chain& c, const PartPtr& owner) {
  ph.addChains.addChain(t.family, t.name, c.name, c.hook);
  for (const Rule& r : c.rules) ph.rules.addRule(t.family, t.name, c.name, r, owner);
}

void rewriteRules(Phases& ph, const Table& t, const Chain& c, const PartPtr& owner) {
  ph.flushChains.flushChain(t.family, t.name, c.name);
  for (const Rule& r : c.rules) ph.rules.addRule(t.family, t.name, c.name, r, owner);
}

const Table* findTable(const Ruleset& rs, const Table& like) {
  for (const Table& t : rs.tables)
    if (t.family == like.family && t.name == like.name) return &t;
  return nullptr;
}

const SetDecl* findDecl(const Table* t, std::string_view name) {
  if (!t) return nullptr;
  for (const SetDecl& d : t->sets)
    if (d.name == name) return &d;
  return nullptr;
}

bool sameRules(const std::vector<ListedRule>& listed, const std::vector<Rule>& want) {
  if (listed.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (listed[i].exprJson != want[i].exprJson || listed[i].comment != want[i].comment) return false;
  return true;
}

bool sameDeclaration(const ListedSet& ls, const SetDecl& d) {
  if (d.dynamic) return !ls.isMap;              // nor a typeof set
  if (!d.typeofSpec.empty()) return ls.isMap;  // nft 1.0.6 lists a typeof map in a form we can't compare
  return ls.keyType == d.keyType && ls.dataType == d.dataType && ls.isMap == !d.dataType.empty() &&
         ls.interval == d.interval;
}

// Desired chains of one table, flattened across owners; each with its Part. Keys are views into
// the Parts' own strings.
struct OwnedChain {
  const Chain* item;
  const PartPtr* part;
  const Chain* operator->() const { return item; }
  const Chain& operator*() const { return *item; }
};
std::map<std::string_view, OwnedChain> desiredChains(const Table& t) {
  std::map<std::string_view, OwnedChain> out;
  for (const auto& [owner, part] : t.parts)
    for (const Chain& c : part->chains) out.emplace(c.name, OwnedChain{&c, &part});
  return out;
}

Element keyOnly(const std::string& set, const std::string& keyJson) {
  return Element(set, keyJson, {}, {}, /*rawKeyText=*/true);
}

}  // namespace

Plan planIncremental(const Committed& from, const Ruleset& to, const std::set<std::string>* onlyOwners) {
  Plan plan;
  if (onlyOwners) plan.owners = *onlyOwners;
  Phases ph;
  struct Pending {
    int count = 0;
    const Element* elem = nullptr;
    const Table* table = nullptr;
    const PartPtr* owner = nullptr;  // elem's Part
    bool inNew = false;              // elem is from the new Part (else only an old one has it)
  };
  std::map<std::string, Pending> overlay;  // ordered: element operations come out grouped by set
  auto touch = [&](const Table& t, const Element& e) -> Pending& {
    std::string key = indexKey(t, e.set, e.key());
    auto it = overlay.find(key);
    if (it == overlay.end()) {
      const IndexedElement* c = from.elements.find(indexSetKey(t.family, t.name, e.set), e.key());
      it = overlay.emplace(std::move(key), Pending{c ? c->count : 0, nullptr, &t}).first;
    }
    return it->second;
  };

  for (const Table& tt : to.tables) {
    const Table* ft = findTable(from.ruleset, tt);
    if (!ft) ph.tables.addTable(tt.family, tt.name);
    for (const SetDecl& d : tt.sets) {
      const SetDecl* old = findDecl(ft, d.name);
      if (old && !(*old == d)) plan.needsFull = true;
      if (!old && d.typeofSpec.empty()) ph.sets.addSet(tt.family, tt.name, d);
    }
    if (ft)
      for (const SetDecl& d : ft->sets)
        if (!findDecl(&tt, d.name)) ph.delSets.deleteSet(tt.family, tt.name, d);

    static const std::map<std::string, PartPtr> kNoParts;
    const auto& oldParts = ft ? ft->parts : kNoParts;
    // One owner's Parts, old and new (either may be absent): chains, rules and element counts.
    auto diffOwner = [&](const PartPtr* oldPart, const PartPtr* newPart) {
      std::map<std::string, const Chain*> oldChains;
      if (oldPart)
        for (const Chain& c : (*oldPart)->chains) oldChains.emplace(c.name, &c);
      if (newPart) {
        for (const Chain& c : (*newPart)->chains) {
          auto o = oldChains.find(c.name);
          if (o == oldChains.end()) {
            addChainWithRules(ph, tt, c, *newPart);
            continue;
          }
          if (!(o->second->hook == c.hook)) plan.needsFull = true;
          else if (o->second->rules != c.rules) rewriteRules(ph, tt, c, *newPart);
          oldChains.erase(o);
        }
      }
      for (const auto& [name, c] : oldChains) {
        ph.flushChains.flushChain(tt.family, tt.name, name);
        ph.delChains.deleteChain(tt.family, tt.name, name);
      }
      if (oldPart)
        for (const Element& e : (*oldPart)->elements) {
          Pending& p = touch(tt, e);
          --p.count;
          if (!p.elem) {
            p.elem = &e;
            p.owner = oldPart;
          }
        }
      if (newPart)
        for (const Element& e : (*newPart)->elements) {
          Pending& p = touch(tt, e);
          ++p.count;
          p.elem = &e;
          p.owner = newPart;
          p.inNew = true;
        }
    };
    auto samePart = [](const PartPtr& a, const PartPtr& b) { return a == b || *a == *b; };
    if (onlyOwners) {
      // The renderer says which owners it touched; the others are the very same Parts.
      for (const std::string& owner : *onlyOwners) {
        auto o = oldParts.find(owner);
        auto n = tt.parts.find(owner);
        const PartPtr* op = o == oldParts.end() ? nullptr : &o->second;
        const PartPtr* np = n == tt.parts.end() ? nullptr : &n->second;
        if (op && np && samePart(*op, *np)) continue;
        if (op || np) diffOwner(op, np);
      }
      continue;
    }
    auto oi = oldParts.begin();
    auto ni = tt.parts.begin();
    while (oi != oldParts.end() || ni != tt.parts.end()) {
      if (ni == tt.parts.end() || (oi != oldParts.end() && oi->first < ni->first)) {
        diffOwner(&(oi++)->second, nullptr);
      } else if (oi == oldParts.end() || ni->first < oi->first) {
        diffOwner(nullptr, &(ni++)->second);
      } else {
        bool same = samePart(oi->second, ni->second);
        const PartPtr* oldPart = &(oi++)->second;
        const PartPtr* newPart = &(ni++)->second;
        if (!same) diffOwner(oldPart, newPart);
      }
    }
  }

  for (const auto& [key, p] : overlay) {
    const Table& t = *p.table;
    std::string setKey = indexSetKey(t.family, t.name, p.elem->set);
    const IndexedElement* c = from.elements.find(setKey, p.elem->key());
    bool had = c && c->count > 0;
    if (p.count > 0) {
      std::string_view value = p.elem->value();
      if (!had) {
        ph.addElems.addElement(t.family, t.name, *p.elem, *p.owner);
      } else if (c->valueJson() != value) {
        ph.delElems.deleteElement(t.family, t.name, *p.elem, *p.owner);
        ph.addElems.addElement(t.family, t.name, *p.elem, *p.owner);
      }
      // A new Part's copy is always taken, so that the replaced Part can go; an element only an
      // old Part had (still owned by an untouched owner) keeps its indexed copy alive.
      if (p.inNew) {
        plan.indexDeltas.push_back({std::move(setKey), std::string(p.elem->key()), ElementRef{p.count, p.elem, *p.owner}});
      } else if (c->count != p.count) {
        plan.indexDeltas.push_back({std::move(setKey), std::string(p.elem->key()), ElementRef{p.count, c->element, nullptr}});
      }
    } else if (had) {
      ph.delElems.deleteElement(t.family, t.name, *p.elem, *p.owner);
      plan.indexDeltas.push_back({std::move(setKey), std::string(p.elem->key()), std::nullopt});
    }
  }
  plan.txn = std::move(ph).join();
  return plan;
}

Plan planReconcile(const std::vector<ListedTable>& kernel, const Ruleset& to) {
  Plan plan;
  plan.rebuildIndex = true;
  Phases ph;
  for (size_t i = 0; i < to.tables.size(); ++i) {
    const Table& tt = to.tables[i];
    static const ListedTable kAbsent;
    const ListedTable& k = i < kernel.size() ? kernel[i] : kAbsent;
    if (!k.exists) ph.tables.addTable(tt.family, tt.name);
    for (const SetDecl& d : tt.sets) {
      auto ks = k.sets.find(d.name);
      if (ks == k.sets.end()) {
        if (d.typeofSpec.empty()) ph.sets.addSet(tt.family, tt.name, d);
        else plan.needsFull = true;  // the start-up declarations should have made it
      } else if (!sameDeclaration(ks->second, d)) {
        plan.needsFull = true;
      }
    }
    const std::map<std::string_view, OwnedChain> wantChains = desiredChains(tt);
    const DesiredElements wantElements = desiredElements(tt);
    for (const auto& [name, c] : wantChains) {
      auto kc = k.chains.find(name);
      if (kc == k.chains.end()) addChainWithRules(ph, tt, *c, *c.part);
      else if (!(kc->second.hook == c->hook)) plan.needsFull = true;
      else if (!sameRules(kc->second.rules, c->rules)) rewriteRules(ph, tt, *c, *c.part);
    }
    for (const auto& [name, kc] : k.chains) {
      if (wantChains.count(name)) continue;
      ph.flushChains.flushChain(tt.family, tt.name, name);
      ph.delChains.deleteChain(tt.family, tt.name, name);
    }
    for (const auto& [setName, ks] : k.sets) {
      const SetDecl* d = findDecl(&tt, setName);
      if (!d) {
        ph.delSets.deleteSet(tt.family, tt.name, SetDecl{setName, ks.keyType, ks.isMap ? ks.dataType : "", ""});
        continue;
      }
      if (d->dynamic) continue;  // the data path's entries (affinity): kept across restarts
      auto w = wantElements.find(setName);
      for (const auto& [keyJson, valueJson] : ks.elements) {
        const OwnedElement* e = w == wantElements.end() ? nullptr : w->second.find(keyJson);
        if (!e) {
          ph.delElems.deleteElement(tt.family, tt.name, keyOnly(setName, keyJson));
          continue;
        }
        const Element& want = *e->element;
        auto listedComment = ks.comments.find(keyJson);
        const bool sameComment = listedComment == ks.comments.end() ? want.comment().empty()
                                                                     : want.comment() == listedComment->second;
        if (want.value() != valueJson || !sameComment) {
          // A new comment needs a new element too: re-adding an existing key changes nothing.
          ph.delElems.deleteElement(tt.family, tt.name, want, *e->part);
          ph.addElems.addElement(tt.family, tt.name, want, *e->part);
        }
      }
    }
    ph.reserveElementAdds(elementCount(wantElements));
    for (const auto& [setName, elems] : wantElements) {
      auto ks = k.sets.find(setName);
      const bool emptyInKernel = ks == k.sets.end() || ks->second.elements.empty();  // a cold start
      for (const OwnedElement& e : elems.all())
        if (emptyInKernel || ks->second.elements.find(e.element->key()) == ks->second.elements.end())
          ph.addElems.addElement(tt.family, tt.name, *e.element, *e.part);
    }
  }
  plan.txn = std::move(ph).join();
  return plan;
}

Plan planFull(const std::vector<ListedTable>& kernel, const Ruleset& to) {
  Plan plan;
  plan.rebuildIndex = true;
  Phases ph;
  for (size_t i = 0; i < to.tables.size(); ++i) {
    const Table& tt = to.tables[i];
    static const ListedTable kAbsent;
    const ListedTable& k = i < kernel.size() ? kernel[i] : kAbsent;
    // Never delete the table: other traffic keeps flowing through the old rules until the commit.
    ph.tables.addTable(tt.family, tt.name);
    // `flush table` empties every chain but no set: the sets we keep are flushed one by one, or
    // their elements would keep pointing at chains about to go and block re-adding a key with a
    // new value (a takeover from another layout, a resync after a failure).
    ph.tables.flushTable(tt.family, tt.name);
    const std::map<std::string_view, OwnedChain> wantChains = desiredChains(tt);
    for (const auto& [name, ks] : k.sets) {
      SetDecl listed{name, ks.keyType, ks.isMap ? ks.dataType : "", ""};
      const SetDecl* d = findDecl(&tt, name);
      if (d && sameDeclaration(ks, *d)) {
        // A dynamic set's entries reference no chain: affinity survives a resync.
        if (!ks.elements.empty() && !d->dynamic) ph.tables.flushSet(tt.family, tt.name, listed);
      } else {
        ph.dropStale.deleteSet(tt.family, tt.name, listed);  // after the flushes nothing references it
      }
    }
    // After the flushes nothing references anything, so stale objects can go.
    for (const auto& [name, kc] : k.chains) {
      auto w = wantChains.find(name);
      if (w == wantChains.end() || !(w->second->hook == kc.hook)) ph.dropStale.deleteChain(tt.family, tt.name, name);
    }
    for (const SetDecl& d : tt.sets)
      if (d.typeofSpec.empty()) ph.sets.addSet(tt.family, tt.name, d);
    for (const auto& [name, c] : wantChains) addChainWithRules(ph, tt, *c, *c.part);
    const DesiredElements wantElements = desiredElements(tt);
    ph.reserveElementAdds(elementCount(wantElements));
    for (const auto& [setName, elems] : wantElements)
      for (const OwnedElement& e : elems.all()) ph.addElems.addElement(tt.family, tt.name, *e.element, *e.part);
  }
  plan.txn = std::move(ph).join();
  return plan;
}

ElementIndex buildIndex(const Ruleset& rs) {
  ElementIndex idx;
  for (const Table& t : rs.tables)
    for (const auto& [owner, part] : t.parts)
      for (const Element& e : part->elements) {
        idx.add(indexSetKey(t.family, t.name, e.set), e, part);
      }
  return idx;
}

namespace {
bool sameTables(const Ruleset& a, const Ruleset& b) {
  if (a.tables.size() != b.tables.size()) return false;
  for (size_t i = 0; i < a.tables.size(); ++i)
    if (a.tables[i].family != b.tables[i].family || a.tables[i].name != b.tables[i].name) return false;
  return true;
}
}  // namespace

void applyCommitted(Committed& c, const Ruleset& to, const Plan& plan) {
  if (plan.owners && sameTables(c.ruleset, to)) {
    for (size_t i = 0; i < to.tables.size(); ++i) {
      Table& mine = c.ruleset.tables[i];
      const Table& theirs = to.tables[i];
      if (!(mine.sets == theirs.sets)) mine.sets = theirs.sets;
      for (const std::string& owner : *plan.owners) {
        auto n = theirs.parts.find(owner);
        if (n == theirs.parts.end()) mine.parts.erase(owner);
        else mine.parts[owner] = n->second;
      }
    }
  } else {
    c.ruleset = to;
  }
  if (plan.rebuildIndex) {
    c.elements = buildIndex(c.ruleset);
    return;
  }
  for (const auto& d : plan.indexDeltas) {
    if (d.ref) c.elements.set(d.setKey, *d.ref);
    else c.elements.erase(d.setKey, d.keyJson);
  }
}

bool staticDeclarationsListed(const Ruleset& skeleton, const std::vector<ListedTable>& listed,
                              const std::set<Family>& families) {
  for (size_t i = 0; i < skeleton.tables.size(); ++i) {
    const Table& t = skeleton.tables[i];
    if (!families.count(t.family)) continue;
    if (i >= listed.size() || !listed[i].exists) return false;
    for (const SetDecl& d : t.sets) {
      if (d.typeofSpec.empty()) continue;  // declared in the sync's own JSON transaction
      auto ls = listed[i].sets.find(d.name);
      if (ls == listed[i].sets.end() || !sameDeclaration(ls->second, d)) return false;
    }
    for (const std::string& c : t.counters)
      if (!listed[i].counters.count(c)) return false;
  }
  return true;
}

}  // namespace kpn::nft
