// The syncer's word on single Services as Kubernetes Events on the Service, for its owner (who
// usually cannot read this node's log): a Warning when the kernel refuses its rules (each retry
// that is refused again counts in the event's series), a Normal one when they are programmed
// again.
#pragma once

#include <string>

#include "pkg/events/recorder.h"
#include "pkg/sync/syncer.h"

namespace kpn::events {

class ServiceEvents : public sync::SyncerListener {
 public:
  ServiceEvents(Recorder& recorder, std::string nodeName) : recorder_(recorder), node_(std::move(nodeName)) {}
  void serviceRefused(const std::string& service, const std::string& error) override {
    recorder_.record(serviceRefusedEvent(node_, service, error));
  }
  void serviceProgrammedAgain(const std::string& service) override {
    recorder_.record(serviceProgrammedEvent(node_, service));
  }

 private:
  Recorder& recorder_;
  const std::string node_;
};

}  // namespace kpn::events
