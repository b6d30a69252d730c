// The error contract that the lobby and the node's ingest both answer with (docs/design.md §3):
// each error code with its HTTP status and whether a client may retry, rendered as
// application/problem+json (RFC 9457) with `code` and `retryable` members. Stateless;
// thread-safe.
#pragma once

#include <string>

#include "common/status.h"
#include "server/http_types.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::server {

enum class ErrorCode {
  kInvalidArgument,       // 400
  kUnauthenticated,       // 401
  kRoomUnknown,           // 404, same answer for "absent" and "not yours"
  kNotFound,              // 404, no such endpoint or player
  kMethodNotAllowed,      // 405
  kOutcomeConflict,       // 409
  kPlayerBusy,            // 409
  kRoomExists,            // 409, allocation of a room id already used differently
  kPayloadTooLarge,       // 413
  kUnsupportedMediaType,  // 415
  kIdempotencyMismatch,   // 422
  kRosterMismatch,        // 422
  kOriginalExpired,       // 410, the room settled but its receipt is past retention: delivered
  kRoomIdReused,          // 409, allocation of a room id that was settled before
  kCursorAhead,           // 409, an event cursor beyond the feed's head
  kCursorTrimmed,         // 410, an event cursor below the oldest event retained
  kEpochChanged,          // 409, an event cursor from another epoch of the feed
  kModeInUse,             // 409, a changed declaration of a mode a room was allocated in
  kNotVoidable,           // 409, a void of a match that moved no rating (an ABORTED one)
  kVoidTooLarge,          // 409, a replay void over the lobby's limit of matches to rate again
  kModeClosed,            // 409, an allocation in a mode closed to new rooms
  kUnavailable,           // 503 + Retry-After, the only retryable one
  kInternal,              // 500, a failure a retry would repeat (a refused write, a reply with no
                          // encoding)
};

struct ErrorInfo {
  const char* code;  // e.g. "ROOM_UNKNOWN"
  int http_status;
  bool retryable;
  const char* title;
};

const ErrorInfo& InfoOf(ErrorCode code);

// The problem reply: a v1::ProblemDetails as JSON. `detail` must not reveal more than the caller
// may know.
HttpReply ProblemReply(ErrorCode code, const std::string& detail, const std::string& instance,
                       int retry_after_s = 1);
// The same with members of its own beside the standard ones (the event feed's position, say):
// `extra`'s type, title, status, detail, instance, code and retryable are overwritten.
HttpReply ProblemReply(ErrorCode code, const std::string& detail, const std::string& instance,
                       v1::ProblemDetails extra);

// The problem of one item of a batch reply: the members of a problem body a client acts on.
v1::Problem ItemProblem(ErrorCode code, const std::string& detail);

// The problem of a body that wire::DecodeBody refused with `decoded`: PAYLOAD_TOO_LARGE when it
// holds more than the decoding limits allow (RESOURCE_EXHAUSTED), INVALID_ARGUMENT otherwise.
ErrorCode ProblemOfUndecodable(const Status& decoded);

}  // namespace verdict::server
