// Syntax checks for the names that leave the API types: names and port names end up inside
// nftables chain names, so anything these reject never reaches nft. (Addresses: pkg/net/ip.h.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pkg/api/types.h"

namespace kpn::api {

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters. Namespaces.
bool isDns1123Label(std::string_view s);
// RFC 1035 label: like an RFC 1123 label but starting with a letter. Service names.
bool isDns1035Label(std::string_view s);
// RFC 1123 subdomain: dot-separated labels, at most 253 characters. Object names.
bool isDns1123Subdomain(std::string_view s);
// Service port name (IANA_SVC_NAME): [a-z0-9-], at most 15 characters, at least one letter, no
// leading/trailing or doubled '-'. The empty name is valid (single-port services).
bool isServicePortName(std::string_view s);

// "TCP" / "UDP" / "SCTP" exactly as the API spells them.
std::optional<Protocol> parseProtocol(std::string_view s);

// `s` quoted, with control characters and non-ASCII bytes escaped: for log lines and error
// strings that repeat a value which failed validation.
std::string quoted(std::string_view s);

}  // namespace kpn::api
