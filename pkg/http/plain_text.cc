#include "pkg/http/plain_text.h"

namespace kpn::http {

std::string pathOf(const std::string& target) { return target.substr(0, target.find('?')); }

Response plainText(int status, std::string body, const char* type) {
  Response r;
  r.status = status;
  r.headers = {{"Content-Type", type}, {"X-Content-Type-Options", "nosniff"}};
  r.body = std::move(body);
  return r;
}

Response notFound() { return plainText(404, "404 page not found\n"); }

}  // namespace kpn::http
