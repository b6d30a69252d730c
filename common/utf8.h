// UTF-8 as RFC 3629 defines it, for the code that must tell text from bytes: the wire format's
// checks (proto/wire.h) and the JSON log lines (common/json_log.h). Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace verdict {

// The length of the well-formed UTF-8 sequence at the start of `s` (no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 if there is none (or `s` is empty).
size_t Utf8SequenceLength(std::string_view s);

}  // namespace verdict
