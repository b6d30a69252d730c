// A bearer token as it travels in an `Authorization: Bearer TOKEN` header: one word of visible
// ASCII (0x21-0x7e), no spaces, no control characters. Checked wherever a token enters verdict
// (a node's options, a token replaced at runtime, the command line), so that a stray newline
// from a token file is refused with a clear error at once, instead of making every request the
// node sends malformed. Stateless; thread-safe.
#pragma once

#include <string_view>

#include "common/status.h"

namespace verdict {

// OK, or INVALID_ARGUMENT saying what is wrong ("is empty", or which byte at which offset
// cannot go in a header); the message never quotes the token.
Status CheckBearerToken(std::string_view token);

}  // namespace verdict
