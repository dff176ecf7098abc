// Our table layout's words on a trace report (pkg/render/layout.h names the objects): why a
// packet is refused or dropped — no endpoints, an unknown port, a source range, a traffic policy
// Local without a local endpoint, an unallocated ServiceCIDR address — and what an
// externalTrafficPolicy Local dispatch means. What it does not recognise keeps nft/'s generic
// words (the rules' and elements' comments).
#pragma once

#include "nft/eval/trace_report.h"

namespace kpn::trace {

void explainForOurLayout(nft::eval::Report& r);

}  // namespace kpn::trace
