// The RapidJSON-facing half of decode.h, kept apart so that only the callers that already hold a
// RapidJSON value (the manifest decoder, the API-watch source) see RapidJSON at all.
#pragma once

#include <rapidjson/fwd.h>

#include <string>

#include "pkg/api/decode.h"

namespace kpn::api {

// Decodes one object, or every item of a List / ServiceList / EndpointSliceList / NodeList, into
// `out`. A JSON null is no object (an empty YAML document); anything else that is not a valid
// Service, EndpointSlice, Node or ServiceCIDR adds one line to out.errors. Never throws.
void decodeObject(const rapidjson::Value& v, DecodedObjects& out);

// Same, for an object whose kind may be left out (the items of a typed list, as the API server
// sends them): `kind` applies when the object has none.
void decodeObjectAs(const rapidjson::Value& v, const std::string& kind, DecodedObjects& out);

}  // namespace kpn::api
