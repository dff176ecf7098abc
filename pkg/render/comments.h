// Every comment a Service puts on a rule or an element is built by nftComment, so the limit on
// comments (nft keeps at most 128 bytes: boundedComment, comment.h) is applied in one place.
#pragma once

#include <string>

#include "pkg/api/types.h"

namespace kpn::render {

// The one place comment text is finished: boundedComment.
std::string nftComment(std::string text);
// "<ns>/<name>"
std::string serviceComment(const api::Service& svc);
// "<ns>/<name>:<port name or number>", on a service port's elements
std::string servicePortComment(const api::Service& svc, const api::ServicePort& port);

}  // namespace kpn::render
