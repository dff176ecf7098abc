#include "pkg/render/comments.h"

#include "pkg/render/comment.h"
#include "pkg/render/layout.h"

namespace kpn::render {

std::string nftComment(std::string text) { return boundedComment(std::move(text)); }

std::string serviceComment(const api::Service& svc) { return nftComment(svc.meta.ns + "/" + svc.meta.name); }

std::string servicePortComment(const api::Service& svc, const api::ServicePort& port) {
  return nftComment(svc.meta.ns + "/" + svc.meta.name + ":" + portKey(port));
}

}  // namespace kpn::render
