// The lobby's endpoint that takes a settled match back (docs/design.md §5, "Voiding a match"):
//   POST /v1/matches/{match_id}:void   admin: {"reason": "...", "policy": "replay"|"compensate"}
//   POST /v1/rooms/{room_id}:void      admin: the same, the match named by its room
// The service has routed the request and checked the path's id (settlement_service.cc); this reads
// the body, calls the store and answers by kVoidAnswers (lobby/answers.h).
#include <spdlog/spdlog.h>

#include "lobby/settlement_service.h"
#include "proto/wire.h"

namespace verdict::lobby {
namespace {

// The policy a request names; nullopt for one that is not a policy.
std::optional<VoidPolicy> PolicyOf(const std::string& name) {
  if (name == "replay") return VoidPolicy::kReplay;
  if (name == "compensate") return VoidPolicy::kCompensate;
  return std::nullopt;
}

}  // namespace

HttpReply SettlementService::PostVoid(const HttpRequest& request, const Caller& caller,
                                      uint64_t match_id, uint64_t room_id) {
  const std::string path = match_id ? "/v1/matches/" + std::to_string(match_id) + ":void"
                                    : "/v1/rooms/" + std::to_string(room_id) + ":void";
  const auto refuse = [&](ErrorCode code, const std::string& detail) {
    voids_.Add(std::string(InfoOf(code).code));
    return ProblemReply(code, detail, path);
  };
  if (!caller.admin) return refuse(ErrorCode::kUnauthenticated, "a void needs the admin token");
  const auto format = wire::FormatOfContentType(request.content_type);
  if (!format) {
    return refuse(ErrorCode::kUnsupportedMediaType,
                  "send application/x-protobuf or application/json");
  }
  v1::MatchVoidRequest body;
  if (Status decoded = wire::DecodeBody(request.body, *format, &body); !decoded.ok()) {
    return refuse(server::ProblemOfUndecodable(decoded), decoded.message());
  }
  if (body.reason().empty()) return refuse(ErrorCode::kInvalidArgument, "reason is required");
  const std::optional<VoidPolicy> policy = PolicyOf(body.policy());
  if (!policy) {
    return refuse(ErrorCode::kInvalidArgument,
                  "policy must be \"replay\" (as if the match had never been played) or "
                  "\"compensate\" (each player's change inverted)");
  }
  const VoidRequest void_request{.match_id = match_id,
                                 .room_id = room_id,
                                 .policy = *policy,
                                 .reason = body.reason(),
                                 .replay_limit = options_.void_replay_limit};
  auto outcome = governance_.VoidMatch(void_request);
  if (!outcome.ok()) {
    voids_.Add(std::string(InfoOf(ErrorCode::kUnavailable).code));
    return FailureReply(outcome.status(), path);
  }
  if (outcome->status == VoidStatus::kVoided && hub_)
    hub_->Committed();  // its event is in the feed
  const Answer* answer = AnswerOf(kVoidAnswers, outcome->status);
  voids_.Add(std::string(answer ? LabelOf(*answer) : InfoOf(ErrorCode::kInternal).code));
  const std::string named = match_id ? "match " + std::to_string(match_id)
                                     : "the match of room " + std::to_string(room_id);
  std::string detail = named;
  if (outcome->status == VoidStatus::kTooLarge) {
    detail = "a replay of " + named + " would rate again " +
             (outcome->more_than ? "more than " : "") + std::to_string(outcome->would_replay) +
             " later matches, over the limit of " + std::to_string(options_.void_replay_limit) +
             " (--void-replay-limit); void it with \"compensate\", or raise the limit";
  }
  return AnswerReply(answer, "void", {.detail = detail}, outcome->voided, request, path);
}

}  // namespace verdict::lobby
