// The plain replies the daemon's own servers (healthz, metrics) share.
#pragma once

#include <string>

#include "pkg/http/server.h"

namespace kpn::http {

// The request target's path, without its query.
std::string pathOf(const std::string& target);
Response plainText(int status, std::string body, const char* type = "text/plain; charset=utf-8");
Response notFound();  // Go's net/http 404 body, as upstream's servers answer

}  // namespace kpn::http
