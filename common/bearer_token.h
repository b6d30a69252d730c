// A bearer token as it travels in an `Authorization: Bearer TOKEN` header (RFC 6750): one word
// of visible ASCII (0x21-0x7e), no spaces, no control characters. Checked wherever a token enters
// verdict (a node's options, a token replaced at runtime, the command line, the lobby's token
// files), so that a stray newline from a token file is refused with a clear error at once,
// instead of making every request the node sends malformed; and read one way from a request's
// header by every endpoint that takes one (the lobby's and the node's ingest). Stateless;
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace verdict {

// OK, or INVALID_ARGUMENT saying what is wrong ("is empty", or which byte at which offset
// cannot go in a header); the message never quotes the token.
Status CheckBearerToken(std::string_view token);

// The token of an Authorization header value: the scheme in any case (RFC 9110 §11.1, so
// `bearer` and `BEARER` too), one or more spaces, then the token; nullopt if the value is not a
// bearer credential or its token is empty.
std::optional<std::string_view> BearerTokenOf(std::string_view authorization);

// A token given on the command line (`value`, from the flag named `flag`) or in a file (`file`,
// named by `file_flag`; its content with surrounding white space trimmed), checked by
// CheckBearerToken. Empty when neither is set. NOT_FOUND if the file cannot be read,
// INVALID_ARGUMENT naming the flag or the file for a token that cannot go in a header.
Result<std::string> BearerTokenFrom(const std::string& value, const std::string& file,
                                    const std::string& flag, const std::string& file_flag);

// One line of a node tokens file.
struct NodeTokenLine {
  std::string node_id;
  std::string token;
};

// The lines of a node tokens file (the lobby's --node-tokens-file, a rescuer's tokens file):
// `node_id token` on each, lines that are empty or start with '#' skipped; a node may appear on
// several lines. INVALID_ARGUMENT naming FILE:LINE for a line of another shape or a token that
// CheckBearerToken refuses (never quoting it), and for text that names no token at all (an empty
// file, or one cut short while it was written, is not read as "no node").
Result<std::vector<NodeTokenLine>> ParseNodeTokensFile(std::string_view text,
                                                       const std::string& file_name);

}  // namespace verdict
