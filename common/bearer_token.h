// A bearer token as it travels in an `Authorization: Bearer TOKEN` header (RFC 6750): one word
// of visible ASCII (0x21-0x7e), no spaces, no control characters. Checked wherever a token enters
// verdict (a node's options, a token replaced at runtime, the command line, the lobby's token
// files), so that a stray newline from a token file is refused with a clear error at once,
// instead of making every request the node sends malformed; and read one way from a request's
// header by every endpoint that takes one (the lobby's and the node's ingest). Stateless;
// thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"

namespace verdict {

// OK, or INVALID_ARGUMENT saying what is wrong ("is empty", or which byte at which offset
// cannot go in a header); the message never quotes the token.
Status CheckBearerToken(std::string_view token);

// The token of an Authorization header value: the scheme in any case (RFC 9110 §11.1, so
// `bearer` and `BEARER` too), one or more spaces, then the token; nullopt if the value is not a
// bearer credential or its token is empty.
std::optional<std::string_view> BearerTokenOf(std::string_view authorization);

}  // namespace verdict
