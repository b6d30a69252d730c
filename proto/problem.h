// Reading the lobby's error bodies: application/problem+json (RFC 9457) with the `code` and
// `retryable` members of the error contract (docs/design.md §3), as server/problem.h writes them.
// Every client of the lobby reads a problem through ParseProblem. Stateless; thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "verdict/v1/verdict.pb.h"

namespace verdict::wire {

inline constexpr std::string_view kProblemType = "application/problem+json";

// The problem in an error reply, or nullopt when the reply is not one: `content_type` is not
// application/problem+json, or `body` is not a JSON object (a proxy's HTML page, an empty
// body). Members that are absent or of the wrong JSON type are left empty (`code`, `detail`)
// or 0 (`status`), except `retryable`, which is false only when the body says
// `"retryable": false`: a client gives up on a request only when the lobby said so.
std::optional<v1::Problem> ParseProblem(std::string_view body, std::string_view content_type);

}  // namespace verdict::wire
