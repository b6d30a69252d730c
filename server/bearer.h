// Reading `Authorization: Bearer TOKEN` (RFC 6750), one way for every endpoint that takes a
// token, the lobby's and the node's ingest alike: the scheme in any case (RFC 9110 §11.1, so
// `bearer` and `BEARER` too), then one or more spaces, then the token. Pure; thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace verdict::server {

// The token of an Authorization header value, or nullopt if the value is not a bearer
// credential or its token is empty.
std::optional<std::string_view> BearerToken(std::string_view authorization);

}  // namespace verdict::server
