#include "nft/trace_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "nft/json_text.h"

namespace kpn::nft::eval {

namespace {

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string hostPort(Family f, const std::string& a, uint16_t port) {
  return (f == Family::IPv6 ? "[" + a + "]" : a) + ":" + std::to_string(port);
}

std::string percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g%%", p * 100);
  return buf;
}

// The rule as people read it: without its comment (shown on its own).
std::string matchText(const Step& s) {
  std::string suffix = " comment \"" + s.comment + "\"";
  if (!s.comment.empty() && s.rule.size() >= suffix.size() &&
      s.rule.compare(s.rule.size() - suffix.size(), suffix.size(), suffix) == 0)
    return s.rule.substr(0, s.rule.size() - suffix.size());
  return s.rule;
}

bool sameLookup(const Lookup& a, const Lookup& b) {
  return a.set == b.set && a.key == b.key && a.element == b.element && a.value == b.value && a.comment == b.comment;
}

const char* reportVerdict(const Trace& t) {
  switch (t.verdict) {
    case Verdict::Dnat: return "dnat";
    case Verdict::Unsupported: return "unsupported";
    case Verdict::Mixed: return t.candidates.empty() ? "accept" : verdictName(t.candidates.front().verdict);
    default: return verdictName(t.verdict);
  }
}

// The shared path: equal steps, and steps that differ only in what they did (a DNAT target, the
// routing decision that follows it) merged into one.
void mergePaths(Report& r) {
  const auto& cands = r.trace.candidates;
  if (cands.empty()) return;
  std::vector<std::vector<ReportStep>> paths;
  for (const auto& c : cands) paths.push_back(reportSteps(c));
  for (size_t i = 0;; ++i) {
    bool allHave = true, anyHas = false;
    for (const auto& p : paths) {
      allHave = allHave && i < p.size();
      anyHas = anyHas || i < p.size();
    }
    if (!allHave) {
      r.pathComplete = !anyHas;
      return;
    }
    const ReportStep& first = paths[0][i];
    bool sameRule = true, sameVerdict = true;
    for (const auto& p : paths) {
      sameRule = sameRule && p[i].hook == first.hook && p[i].chain == first.chain && p[i].match == first.match;
      sameVerdict = sameVerdict && p[i].verdict == first.verdict;
    }
    if (!sameRule) {
      r.pathComplete = false;
      return;
    }
    ReportStep step = first;
    if (!sameVerdict) {
      if (startsWith(first.verdict, "dnat to")) {
        step.verdict = "dnat to one of " + std::to_string(paths.size()) + " candidates";
      } else {
        std::vector<std::string> seen;
        for (const auto& p : paths)
          if (std::find(seen.begin(), seen.end(), p[i].verdict) == seen.end()) seen.push_back(p[i].verdict);
        step.verdict.clear();
        for (const auto& v : seen) step.verdict += (step.verdict.empty() ? "" : " | ") + v;
      }
      // Keep the lookups every candidate made alike; the slot each drew differs.
      step.lookups.clear();
      for (const auto& l : first.lookups) {
        bool everywhere = true;
        for (const auto& p : paths) {
          bool found = false;
          for (const auto& m : p[i].lookups) found = found || sameLookup(l, m);
          everywhere = everywhere && found;
        }
        if (everywhere) step.lookups.push_back(l);
      }
    }
    r.path.push_back(std::move(step));
  }
}

// The comment of the first map element the packet met (a dispatch or verdict map names the
// service port), else of the first set element.
std::optional<std::string> serviceOf(const Trace& t) {
  for (bool mapsOnly : {true, false})
    for (const auto& c : t.candidates)
      for (const auto& s : c.path)
        for (const auto& l : s.lookups)
          if (!l.comment.empty() && (!mapsOnly || !l.value.empty())) return l.comment;
  return std::nullopt;
}

// Why one candidate was (or was not) masqueraded: the masquerading rule's comment, else the
// comment of the rule that marked the packet for it.
std::string masqueradeWhyOf(const Candidate& c) {
  for (size_t i = 0; i < c.path.size(); ++i) {
    const Step& s = c.path[i];
    if (s.action.find("masquerade to ") == std::string::npos) continue;
    std::string where = "masqueraded to " + c.sourceSeen + " in chain " + s.chain;
    if (!s.comment.empty()) return where + ": " + s.comment;
    for (size_t j = i; j-- > 0;) {
      const Step& m = c.path[j];
      if (m.action.find("mark 0x") != std::string::npos && !m.comment.empty())
        return where + ", marked in chain " + m.chain + ": " + m.comment;
    }
    return where + ": " + matchText(s);
  }
  return "";
}

std::string genericReason(const Report& r) {
  const Trace& t = r.trace;
  if (t.verdict == Verdict::Unsupported || t.candidates.empty()) return t.reason;
  if (t.verdict == Verdict::Dnat) {
    size_t n = 0;
    for (const auto& c : t.candidates) n += c.translated && c.verdict == Verdict::Accept;
    std::string how = selectionName(t.candidates.front().selection);
    return "DNAT to " + std::to_string(n) + " candidate" + (n == 1 ? "" : "s") + (r.service ? " of " + *r.service : "") +
           (n > 1 && !how.empty() ? ", chosen at " + how : "");
  }
  if (t.verdict == Verdict::Mixed) return t.reason;
  const Candidate& c = t.candidates.front();
  const Step* last = nullptr;
  for (const auto& s : c.path)
    if (!s.chain.empty()) last = &s;
  if (t.verdict == Verdict::Accept) return "accepted untouched: no rule of the table translated, dropped or rejected it";
  std::string out = std::string(verdictName(t.verdict) == std::string("reject") ? "rejected" : "dropped");
  if (!last) return out;
  out += " in chain " + last->chain + ": " + (last->comment.empty() ? matchText(*last) : last->comment);
  // The element that sent it there, when a lookup did.
  for (auto s = c.path.rbegin(); s != c.path.rend(); ++s)
    for (auto l = s->lookups.rbegin(); l != s->lookups.rend(); ++l)
      if (!l->value.empty())
        return out + " (@" + l->set + " " + l->element + (l->comment.empty() ? "" : " \"" + l->comment + "\"") + " → " +
               l->value + ")";
  return out;
}

void appendStep(std::string& out, const ReportStep& s, const std::string& indent) {
  if (s.chain.empty()) {
    out += indent + "routing: " + s.verdict + "\n";
    return;
  }
  out += indent + s.hook + " " + s.chain + ": " + s.match + "\n" + indent + "    → " + s.verdict + "\n";
  for (const auto& l : s.lookups) {
    out += indent + "    @" + l.set + " key " + l.key + ": element " + l.element;
    if (!l.comment.empty()) out += " \"" + l.comment + "\"";
    if (!l.value.empty()) out += " : " + l.value;
    out += "\n";
  }
}

void jsonStep(std::string& out, const ReportStep& s) {
  out += "{\"hook\":" + jsonString(s.hook) + ",\"chain\":" + jsonString(s.chain) + ",\"match\":" + jsonString(s.match) +
         ",\"verdict\":" + jsonString(s.verdict) + ",\"lookups\":[";
  for (size_t i = 0; i < s.lookups.size(); ++i) {
    const Lookup& l = s.lookups[i];
    out += std::string(i ? "," : "") + "{\"set\":" + jsonString(l.set) + ",\"key\":" + jsonString(l.key) +
           ",\"element\":" + jsonString(l.element) + ",\"value\":" + jsonString(l.value) +
           ",\"comment\":" + (l.comment.empty() ? std::string("null") : jsonString(l.comment)) + "}";
  }
  out += "]}";
}

void jsonSteps(std::string& out, const std::vector<ReportStep>& steps) {
  out += "[";
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i) out += ",";
    jsonStep(out, steps[i]);
  }
  out += "]";
}

std::string jsonNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// The dynamic set the candidates update, and the element of it the first candidate's key found.
std::optional<StickyEntry> stickyOf(const Trace& t, bool kernelEntries) {
  for (const auto& c : t.candidates) {
    if (c.recorded.empty()) continue;
    StickyEntry e;
    e.set = c.recorded.front().set;
    e.timeout = c.recorded.front().timeout;
    e.kernelEntries = kernelEntries;
    for (const auto& s : t.candidates.front().path)
      for (const auto& l : s.lookups)
        if (l.set == e.set && !e.entry) {
          e.entry = l.element;
          e.expiresIn = l.expiresIn;
        }
    return e;
  }
  return std::nullopt;
}

std::string stickyText(const Report& r) {
  const StickyEntry& e = *r.sticky;
  std::string out = "sticky: @" + e.set;
  if (e.entry) {
    const Candidate& c = r.trace.candidates.front();
    out += " holds " + *e.entry +
           (e.expiresIn ? ", expires in " + std::to_string(*e.expiresIn) + " s" : std::string()) +
           ": the client goes to its slot's endpoint " + hostPort(r.trace.family, c.address, c.port) +
           " with probability 1 (each new connection refreshes the entry";
    out += e.timeout ? " to " + std::to_string(e.timeout) + " s)\n" : ")\n";
    return out;
  }
  if (!e.kernelEntries)
    return out + ": a rendered table has no kernel entries, so this is the first pick; a client that holds an entry "
                 "goes to its slot's endpoint with probability 1 (trace the live table to see it)\n";
  const size_t n = r.trace.candidates.size();
  return out + " holds no entry for this client: the first pick is " +
         (n > 1 ? "random among the " + std::to_string(n) + " candidates" : std::string("the one candidate")) +
         ", and the connection creates the entry" +
         (e.timeout ? " (timeout " + std::to_string(e.timeout) + " s)" : std::string()) + "\n";
}

std::string stickyJson(const std::optional<StickyEntry>& s) {
  if (!s) return "null";
  auto num = [](const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : std::string("null"); };
  return "{\"set\":" + jsonString(s->set) + ",\"entry\":" + (s->entry ? jsonString(*s->entry) : std::string("null")) +
         ",\"expiresIn\":" + num(s->expiresIn) + ",\"timeout\":" + std::to_string(s->timeout) +
         ",\"kernelEntries\":" + (s->kernelEntries ? "true" : "false") + "}";
}

std::string causeJson(const std::optional<Cause>& c) {
  if (!c) return "null";
  std::string out = "{\"code\":" + jsonString(c->code) + ",\"message\":" + jsonString(c->message) + ",\"counts\":{";
  for (size_t i = 0; i < c->counts.size(); ++i)
    out += (i ? "," : "") + jsonString(c->counts[i].first) + ":" + std::to_string(c->counts[i].second);
  out += "},\"objects\":[";
  for (size_t i = 0; i < c->objects.size(); ++i) out += (i ? "," : "") + jsonString(c->objects[i]);
  return out + "]}";
}

std::string frontendJson(const std::optional<Frontend>& f) {
  if (!f) return "null";
  return "{\"kind\":" + jsonString(f->kind) + ",\"service\":" + jsonString(f->service) + ",\"port\":" + jsonString(f->port) +
         "}";
}

std::string stateJson(const std::optional<StateInfo>& s) {
  if (!s) return "null";
  return "{\"origin\":" + jsonString(s->origin) + ",\"synced\":" + (s->synced ? "true" : "false") +
         ",\"servicesKnown\":" + std::to_string(s->servicesKnown) + ",\"note\":" + jsonString(s->note) + "}";
}

std::string causeText(const Cause& c) {
  std::string out = "cause: " + c.message + "\n";
  for (const auto& o : c.objects) out += "  - " + o + "\n";
  return out;
}

// The report's JSON object without its closing brace, so that a service report can add to it.
std::string reportJsonBody(const Report& r);

}  // namespace

std::vector<ReportStep> reportSteps(const Candidate& c) {
  std::vector<ReportStep> out;
  for (const auto& s : c.path) out.push_back({s.hook, s.chain, s.chain.empty() ? "" : matchText(s), s.action, s.lookups});
  return out;
}

Report makeReport(Trace trace, bool kernelEntries) {
  Report r;
  r.trace = std::move(trace);
  r.sticky = stickyOf(r.trace, kernelEntries);
  r.verdict = reportVerdict(r.trace);
  r.service = serviceOf(r.trace);
  mergePaths(r);
  size_t masqueraded = 0;
  const Candidate* example = nullptr;
  for (const auto& c : r.trace.candidates)
    if (c.masquerade) {
      ++masqueraded;
      if (!example) example = &c;
    }
  r.masquerade = masqueraded > 0;
  if (!example) {
    r.masqueradeWhy = "no masquerade rule matched: the destination sees the client's own address";
  } else {
    r.masqueradeWhy = masqueradeWhyOf(*example);
    if (masqueraded < r.trace.candidates.size())
      r.masqueradeWhy = "only to " + hostPort(r.trace.family, example->address, example->port) + ": " + r.masqueradeWhy;
  }
  r.reason = genericReason(r);
  return r;
}

std::string reportText(const Report& r) {
  const Trace& t = r.trace;
  const Packet& p = t.packet;
  std::string out = std::string(familyName(t.family)) + " " + p.protocol + " " + hostPort(t.family, p.saddr, p.sport) +
                    " → " + hostPort(t.family, p.daddr, p.dport) +
                    (p.entry == Entry::Output ? ", sent by the node"
                                              : ", in on " + (p.iifname.empty() ? std::string("(no interface)") : p.iifname)) +
                    "\n";
  out += "verdict: " + r.verdict + " — " + r.reason + "\n";
  if (r.cause) out += causeText(*r.cause);
  if (r.state && !r.state->note.empty()) out += "state: " + r.state->note + "\n";
  if (r.service) out += "service: " + *r.service + "\n";
  out += "path:\n";
  for (const auto& s : r.path) appendStep(out, s, "  ");
  bool translated = false;
  for (const auto& c : t.candidates) translated = translated || c.translated;
  if (translated) {
    out += "candidates:\n";
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      const Candidate& c = t.candidates[i];
      out += "  [" + std::to_string(i + 1) + "] " + percent(c.probability);
      if (c.selection != Selection::None) out += std::string(" (") + selectionName(c.selection) + ")";
      if (c.verdict == Verdict::Accept && c.translated)
        out += " " + hostPort(t.family, c.address, c.port) + ", source seen " + c.sourceSeen +
               (c.masquerade ? " (masqueraded)" : "");
      else
        out += std::string(" ") + verdictName(c.verdict) + (c.translated ? "" : " (not translated)");
      out += "\n";
      for (const auto& n : c.notes) out += "      note: " + n + "\n";
    }
  } else {
    for (const auto& c : t.candidates)
      for (const auto& n : c.notes) out += "  note: " + n + "\n";
  }
  if (!r.pathComplete) {
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      out += "then for [" + std::to_string(i + 1) + "]:\n";
      auto steps = reportSteps(t.candidates[i]);
      for (size_t k = r.path.size(); k < steps.size(); ++k) appendStep(out, steps[k], "  ");
    }
  }
  if (r.sticky) out += stickyText(r);
  if (r.verdict == "dnat" || r.verdict == "accept")
    out += std::string("masquerade: ") + (r.masquerade ? "yes — " : "no — ") + r.masqueradeWhy + "\n";
  return out;
}

std::string reportJson(const Report& r) { return reportJsonBody(r) + "}\n"; }

namespace {

std::string reportJsonBody(const Report& r) {
  const Trace& t = r.trace;
  std::string out = "{\"family\":" + jsonString(familyName(t.family)) + ",\"verdict\":" + jsonString(r.verdict) +
                    ",\"service\":" + (r.service ? jsonString(*r.service) : std::string("null")) + ",\"candidates\":[";
  bool translated = false;
  for (const auto& c : t.candidates) translated = translated || c.translated;
  if (translated) {
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      const Candidate& c = t.candidates[i];
      out += std::string(i ? "," : "") + "{\"address\":" + jsonString(c.address) + ",\"port\":" + std::to_string(c.port) +
             ",\"probability\":" + jsonNumber(c.probability) + ",\"verdict\":" +
             jsonString(c.translated && c.verdict == Verdict::Accept ? "dnat" : verdictName(c.verdict)) +
             ",\"selection\":" + (c.selection == Selection::None ? std::string("null") : jsonString(selectionName(c.selection))) +
             ",\"masquerade\":" + (c.masquerade ? "true" : "false") + ",\"source\":" + jsonString(c.sourceSeen) +
             ",\"chains\":[";
      for (size_t k = 0; k < c.chains.size(); ++k) out += (k ? "," : "") + jsonString(c.chains[k]);
      out += "],\"path\":";
      jsonSteps(out, reportSteps(c));
      out += "}";
    }
  }
  out += std::string("],\"masquerade\":") + (r.masquerade ? "true" : "false") +
         ",\"masqueradeReason\":" + jsonString(r.masqueradeWhy) + ",\"reason\":" + jsonString(r.reason) + ",\"path\":";
  jsonSteps(out, r.path);
  out += std::string(",\"pathComplete\":") + (r.pathComplete ? "true" : "false") + ",\"sticky\":" + stickyJson(r.sticky) +
         ",\"chains\":[";
  // The chains of the most probable outcome, as `nft monitor trace` names them.
  if (!t.candidates.empty())
    for (size_t k = 0; k < t.candidates.front().chains.size(); ++k)
      out += (k ? "," : "") + jsonString(t.candidates.front().chains[k]);
  out += "],\"cause\":" + causeJson(r.cause) + ",\"frontend\":" + frontendJson(r.frontend) +
         ",\"state\":" + stateJson(r.state);
  return out;
}

std::string frontendHeading(const Report& r) {
  const Packet& p = r.trace.packet;
  std::string where = hostPort(r.trace.family, p.daddr, p.dport) + "/" + p.protocol;
  if (!r.frontend) return where;
  return r.frontend->kind + " " + where + " (port " + r.frontend->port + ")";
}

}  // namespace

std::string serviceReportText(const ServiceReport& r) {
  std::string out = "service " + r.service + (r.port.empty() ? "" : " port " + r.port) + ": ";
  if (r.frontends.empty()) {
    out += "nothing to trace\n";
    if (r.cause) out += causeText(*r.cause);
    if (r.state && !r.state->note.empty()) out += "state: " + r.state->note + "\n";
    return out;
  }
  out += std::to_string(r.frontends.size()) + (r.frontends.size() == 1 ? " address" : " addresses") + "\n";
  for (const auto& s : r.skipped) out += "skipped: " + s + "\n";
  for (const auto& f : r.frontends) out += "\n== " + frontendHeading(f) + " ==\n" + reportText(f);
  return out;
}

std::string serviceReportJson(const ServiceReport& r) {
  std::string target = "{\"service\":" + jsonString(r.service) + ",\"port\":" +
                       (r.port.empty() ? std::string("null") : jsonString(r.port)) + "}";
  std::string skipped = "[";
  for (size_t i = 0; i < r.skipped.size(); ++i) skipped += (i ? "," : "") + jsonString(r.skipped[i]);
  skipped += "]";
  std::string all = "[";
  for (size_t i = 0; i < r.frontends.size(); ++i) all += (i ? "," : "") + reportJsonBody(r.frontends[i]) + "}";
  all += "]";
  if (r.frontends.empty())
    return "{\"target\":" + target + ",\"cause\":" + causeJson(r.cause) + ",\"state\":" + stateJson(r.state) +
           ",\"skipped\":" + skipped + ",\"frontends\":[]}\n";
  return reportJsonBody(r.frontends.front()) + ",\"target\":" + target + ",\"skipped\":" + skipped +
         ",\"frontends\":" + all + "}\n";
}

}  // namespace kpn::nft::eval
