#include "server/problem.h"

#include <spdlog/spdlog.h>

#include "common/log.h"
#include "proto/wire.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::server {

const ErrorInfo& InfoOf(ErrorCode code) {
  static const ErrorInfo kInfos[] = {
      {"INVALID_ARGUMENT", 400, false, "Invalid argument"},
      {"UNAUTHENTICATED", 401, false, "Missing or wrong token"},
      {"ROOM_UNKNOWN", 404, false, "Room unknown"},
      {"NOT_FOUND", 404, false, "Not found"},
      {"METHOD_NOT_ALLOWED", 405, false, "Method not allowed"},
      {"OUTCOME_CONFLICT", 409, false, "Room settled with the other outcome"},
      {"PLAYER_BUSY", 409, false, "Player already in a battle"},
      {"ROOM_EXISTS", 409, false, "Room id already used"},
      {"PAYLOAD_TOO_LARGE", 413, false, "Payload too large"},
      {"UNSUPPORTED_MEDIA_TYPE", 415, false, "Unsupported media type"},
      {"IDEMPOTENCY_MISMATCH", 422, false, "Same room and outcome, different payload"},
      {"ROSTER_MISMATCH", 422, false, "Players do not match the roster"},
      {"ORIGINAL_EXPIRED", 410, false, "Settled; the receipt is past retention"},
      {"ROOM_ID_REUSED", 409, false, "Room id settled before"},
      {"CURSOR_AHEAD", 409, false, "Cursor beyond the feed's head"},
      {"CURSOR_TRIMMED", 410, false, "Cursor older than the oldest event retained"},
      {"EPOCH_CHANGED", 409, false, "Cursor from another epoch of the feed"},
      {"MODE_IN_USE", 409, false, "Mode in use: its declaration is fixed"},
      {"NOT_VOIDABLE", 409, false, "The match moved no rating: nothing to void"},
      {"VOID_TOO_LARGE", 409, false, "The void would rate again more matches than allowed"},
      {"MODE_CLOSED", 409, false, "Mode closed to new rooms"},
      {"UNAVAILABLE", 503, true, "Temporarily unavailable"},
      {"INTERNAL", 500, false, "Internal error"},
  };
  return kInfos[static_cast<int>(code)];
}

HttpReply ProblemReply(ErrorCode code, const std::string& detail, const std::string& instance,
                       int retry_after_s) {
  HttpReply reply = ProblemReply(code, detail, instance, v1::ProblemDetails());
  if (code == ErrorCode::kUnavailable) {
    reply.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  }
  return reply;
}

HttpReply ProblemReply(ErrorCode code, const std::string& detail, const std::string& instance,
                       v1::ProblemDetails problem) {
  const ErrorInfo& info = InfoOf(code);
  problem.set_type(std::string("urn:verdict:problem:") + info.code);
  problem.set_title(info.title);
  problem.set_status(info.http_status);
  problem.set_detail(wire::ValidUtf8(detail));
  problem.set_instance(wire::ValidUtf8(instance));
  problem.set_code(info.code);
  problem.set_retryable(info.retryable);
  HttpReply reply;
  reply.status = info.http_status;
  reply.content_type = "application/problem+json";
  if (auto body = wire::ToJson(problem); body.ok()) {
    reply.body = std::move(*body);
  } else {
    // The status and headers still say what happened.
    Log().error("a {} problem goes out without its body: {}", info.code, body.status().ToString());
  }
  return reply;
}

v1::Problem ItemProblem(ErrorCode code, const std::string& detail) {
  const ErrorInfo& info = InfoOf(code);
  v1::Problem problem;
  problem.set_code(info.code);
  problem.set_status(info.http_status);
  problem.set_retryable(info.retryable);
  problem.set_detail(wire::ValidUtf8(detail));
  return problem;
}

ErrorCode ProblemOfUndecodable(const Status& decoded) {
  return decoded.code() == StatusCode::kResourceExhausted ? ErrorCode::kPayloadTooLarge
                                                          : ErrorCode::kInvalidArgument;
}

}  // namespace verdict::server
