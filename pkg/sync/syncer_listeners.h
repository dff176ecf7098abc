// Several SyncerListeners behind the syncer's one: the status record and the Kubernetes Events
// both hear what the kernel said.
#pragma once

#include <vector>

#include "pkg/sync/syncer.h"

namespace kpn::sync {

class SyncerListeners : public SyncerListener {
 public:
  void add(SyncerListener* l) { all_.push_back(l); }
  void serviceRefused(const std::string& service, const std::string& error) override {
    for (auto* l : all_) l->serviceRefused(service, error);
  }
  void serviceProgrammedAgain(const std::string& service) override {
    for (auto* l : all_) l->serviceProgrammedAgain(service);
  }
  void syncFailed(const std::string& error) override {
    for (auto* l : all_) l->syncFailed(error);
  }

 private:
  std::vector<SyncerListener*> all_;
};

}  // namespace kpn::sync
