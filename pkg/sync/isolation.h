// Failure isolation for the syncer: when the kernel rejects a transaction, find the services
// whose rules it refuses (bisection over services, each step a kernel check that applies
// nothing), so that everything else is programmed, and retry the refused ones with backoff.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/sync/clock.h"

namespace kpn::sync {

// The renderer names a service's Parts "svc ns/name".
bool isServiceOwner(const std::string& owner);
std::string serviceOfOwner(const std::string& owner);

// `rs` without the Parts of `owners` and without the tables of families outside `families`
// (nullptr: all families).
nft::Ruleset withoutOwners(const nft::Ruleset& rs, const std::set<std::string>& owners,
                           const std::set<nft::Family>* families = nullptr);

// The candidates the kernel refuses, by bisection: `rejects(excluded)` gives the kernel's error
// for the transaction without the `excluded` candidates, nullopt when it would commit; it must
// accept with every candidate excluded. Each step is logged at --v=2. With b bad candidates
// among n this asks about O(b log n) times. Returns the bad ones with the error each one got.
std::map<std::string, std::string> findRejected(
    const std::set<std::string>& candidates,
    const std::function<std::optional<std::string>(const std::set<std::string>& excluded)>& rejects);

// The kernel refused the transaction of `desired` as a whole: which services does it refuse?
// The candidates are the services among `onlyOwners` (all of them when nullptr); `check(trial)`
// gives the kernel's error for the transaction planned from `trial` (`desired` without some of
// them), nullopt when it would commit.
struct ServiceRefusals {
  // Refused even without every candidate: no service is to blame, the sync fails.
  std::optional<std::string> withoutServices;
  std::map<std::string, std::string> owners;  // each refused service's owner, with its error
};
ServiceRefusals findRefusedServices(const nft::Ruleset& desired, const std::set<std::string>* onlyOwners,
                                    const std::function<std::optional<std::string>(const nft::Ruleset& trial)>& check);

// Owners the kernel refused, each with its backoff: left out of every sync until its retry is
// due (or its service changes), then tried again; 500 ms doubling up to `maxBackoff`.
class RetryBook {
 public:
  using Duration = std::chrono::steady_clock::duration;
  explicit RetryBook(Duration maxBackoff = std::chrono::seconds(30)) : max_(maxBackoff) {}
  // Records a refusal; returns the delay until the next try.
  Duration reject(const std::string& owner, SteadyTime now);
  void accepted(const std::string& owner) { entries_.erase(owner); }
  // Owners to leave out at `now`: refused, not due, not in `retryNow`.
  std::set<std::string> excluded(SteadyTime now, const std::set<std::string>* retryNow) const;
  std::optional<SteadyTime> nextRetry() const;
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  bool has(const std::string& owner) const { return entries_.count(owner) != 0; }
  std::set<std::string> owners() const;
  // After a commit: forgets the owners `rendered` no longer has, and accepts those that were
  // tried again (not in `leftOut`) and not refused now. Returns the ones accepted that still
  // exist: programmed again.
  std::vector<std::string> settle(const nft::Ruleset& rendered, const std::set<std::string>& leftOut,
                                  const std::set<std::string>& refusedNow);

 private:
  struct Entry {
    int failures = 0;
    SteadyTime retryAt;
  };
  Duration max_;
  std::map<std::string, Entry> entries_;
};

}  // namespace kpn::sync
