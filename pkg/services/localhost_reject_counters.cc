#include "pkg/services/localhost_reject_counters.h"

namespace kpn::services {

std::string localhostRejectCounter(api::Protocol proto) {
  return std::string("localhost-nodeport-rejected-") + api::protocolName(proto);
}

std::vector<api::Protocol> localhostRejectedProtocols() { return {api::Protocol::UDP, api::Protocol::SCTP}; }

}  // namespace kpn::services
