#include "lobby/problem.h"

#include <cstdio>

namespace verdict::lobby {

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
      {"UNAVAILABLE", 503, true, "Temporarily unavailable"},
      {"INTERNAL", 500, false, "Internal error"},
  };
  return kInfos[static_cast<int>(code)];
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

HttpReply ProblemReply(ErrorCode code, const std::string& detail, const std::string& instance,
                       int retry_after_s) {
  const ErrorInfo& info = InfoOf(code);
  HttpReply reply;
  reply.status = info.http_status;
  reply.content_type = "application/problem+json";
  reply.body = std::string("{\"type\":\"urn:verdict:problem:") + info.code + "\",\"title\":\"" +
               info.title + "\",\"status\":" + std::to_string(info.http_status) + ",\"detail\":\"" +
               JsonEscape(detail) + "\",\"instance\":\"" + JsonEscape(instance) + "\",\"code\":\"" +
               info.code + "\",\"retryable\":" + (info.retryable ? "true" : "false") + "}";
  if (code == ErrorCode::kUnavailable) {
    reply.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  }
  return reply;
}

}  // namespace verdict::lobby
