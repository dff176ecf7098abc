// Syntax checks for the names that leave the API types: names and port names end up inside
// nftables chain names, so anything these reject never reaches nft. (Addresses: pkg/net/ip.h.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pkg/api/types.h"

namespace kpn::api {

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters ("a--b" and "80" are
// labels). Namespaces, Service and EndpointSlice port names, and Service names: the API server
// asks RFC 1035 (a leading letter) of those only while the RelaxedServiceNameValidation gate is
// off, and a proxy must not drop what a server with the gate on accepted.
bool isDns1123Label(std::string_view s);
// RFC 1123 subdomain: dot-separated labels, at most 253 characters. Object names.
bool isDns1123Subdomain(std::string_view s);
// IANA_SVC_NAME (a named targetPort, which names a container port): [a-z0-9-], 1 to 15
// characters, at least one letter, no leading/trailing or doubled '-'.
bool isIanaServiceName(std::string_view s);

// "TCP" / "UDP" / "SCTP" exactly as the API spells them.
std::optional<Protocol> parseProtocol(std::string_view s);

// `s` quoted, with control characters and non-ASCII bytes escaped: for log lines and error
// strings that repeat a value which failed validation.
std::string quoted(std::string_view s);

}  // namespace kpn::api
