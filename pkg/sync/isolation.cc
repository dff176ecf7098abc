#include "pkg/sync/isolation.h"

#include <glog/logging.h>

#include <algorithm>
#include <vector>

namespace kpn::sync {

namespace {
const char kServiceOwnerPrefix[] = "svc ";  // the renderer's owner of a service's Part
}  // namespace

bool isServiceOwner(const std::string& owner) { return owner.rfind(kServiceOwnerPrefix, 0) == 0; }
std::string serviceOfOwner(const std::string& owner) { return owner.substr(sizeof kServiceOwnerPrefix - 1); }

nft::Ruleset withoutOwners(const nft::Ruleset& rs, const std::set<std::string>& owners,
                           const std::set<nft::Family>* families) {
  nft::Ruleset out;
  for (const nft::Table& t : rs.tables) {
    if (families && !families->count(t.family)) continue;
    out.tables.push_back(nft::Table{t.family, t.name, t.sets, t.counters, {}});
    auto& parts = out.tables.back().parts;
    for (const auto& [owner, part] : t.parts)
      if (!owners.count(owner)) parts.emplace_hint(parts.end(), owner, part);
  }
  return out;
}

std::map<std::string, std::string> findRejected(
    const std::set<std::string>& candidates,
    const std::function<std::optional<std::string>(const std::set<std::string>& excluded)>& rejects) {
  std::map<std::string, std::string> bad;
  // Everything starts excluded; groups are let in while the kernel accepts them. A group it
  // refuses is halved until the refused ones are single services.
  std::set<std::string> excluded = candidates;
  std::vector<std::vector<std::string>> work{{candidates.begin(), candidates.end()}};
  int step = 0;
  while (!work.empty()) {
    std::vector<std::string> group = std::move(work.back());
    work.pop_back();
    if (group.empty()) continue;
    std::set<std::string> trial = excluded;
    for (const auto& o : group) trial.erase(o);
    std::optional<std::string> err = rejects(trial);
    ++step;
    VLOG(2) << "bisection step " << step << ": " << group.size() << " service(s) from " << group.front()
            << (err ? " refused" : " accepted");
    if (!err) {
      excluded = std::move(trial);
      continue;
    }
    if (group.size() == 1) {
      bad[group.front()] = *err;
      continue;
    }
    // Second half pushed first: the first half is tried next, keeping the order stable.
    size_t half = group.size() / 2;
    work.emplace_back(group.begin() + static_cast<std::ptrdiff_t>(half), group.end());
    work.emplace_back(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(half));
  }
  return bad;
}

ServiceRefusals findRefusedServices(const nft::Ruleset& desired, const std::set<std::string>* onlyOwners,
                                    const std::function<std::optional<std::string>(const nft::Ruleset& trial)>& check) {
  // The candidates: the services the plan touches (all of them when it compares everything).
  std::set<std::string> candidates;
  for (const nft::Table& t : desired.tables)
    for (const auto& [owner, part] : t.parts)
      if (isServiceOwner(owner) && (!onlyOwners || onlyOwners->count(owner))) candidates.insert(owner);
  auto rejects = [&](const std::set<std::string>& excluded) { return check(withoutOwners(desired, excluded)); };
  ServiceRefusals out;
  out.withoutServices = rejects(candidates);
  if (!out.withoutServices) out.owners = findRejected(candidates, rejects);
  return out;
}

RetryBook::Duration RetryBook::reject(const std::string& owner, SteadyTime now) {
  Entry& e = entries_[owner];
  ++e.failures;
  Duration d = std::chrono::milliseconds(500);
  for (int i = 1; i < e.failures && d < max_; ++i) d *= 2;
  d = std::min(d, max_);
  e.retryAt = now + d;
  return d;
}

std::set<std::string> RetryBook::excluded(SteadyTime now, const std::set<std::string>* retryNow) const {
  std::set<std::string> out;
  for (const auto& [owner, e] : entries_)
    if (now < e.retryAt && !(retryNow && retryNow->count(owner))) out.insert(owner);
  return out;
}

std::optional<SteadyTime> RetryBook::nextRetry() const {
  std::optional<SteadyTime> t;
  for (const auto& [owner, e] : entries_)
    if (!t || e.retryAt < *t) t = e.retryAt;
  return t;
}

std::vector<std::string> RetryBook::settle(const nft::Ruleset& rendered, const std::set<std::string>& leftOut,
                                           const std::set<std::string>& refusedNow) {
  std::vector<std::string> again;
  for (const auto& owner : owners()) {
    bool exists = false;
    for (const nft::Table& t : rendered.tables) exists = exists || t.parts.count(owner);
    if (!exists) {
      accepted(owner);  // the service is gone (or no longer ours)
    } else if (!leftOut.count(owner) && !refusedNow.count(owner)) {
      accepted(owner);
      again.push_back(owner);
    }
  }
  return again;
}

std::set<std::string> RetryBook::owners() const {
  std::set<std::string> out;
  for (const auto& [owner, e] : entries_) out.insert(owner);
  return out;
}

}  // namespace kpn::sync
