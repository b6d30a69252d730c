#include "lobby/room_actions.h"

#include <spdlog/spdlog.h>

#include "lobby/settlement_scheduler.h"
#include "lobby/settlement_service.h"
#include "proto/validation.h"
#include "proto/wire.h"
#include "server/problem.h"

namespace verdict::lobby {

v1::BattleResult AbortResult(const AllocatedRoom& room, const std::string& reason) {
  v1::BattleResult result;
  result.set_room_id(room.room_id);
  result.set_outcome(v1::ABORTED);
  result.set_ended_at_ms(room.allocated_at_ms);
  result.set_node_id(room.node_id);
  result.set_abort_reason(reason);
  for (const v1::Seat& seat : room.seats) {
    v1::PlayerResult* player = result.add_players();
    player->set_player_id(seat.player_id());
    player->set_team(seat.team());
  }
  return result;
}

void SettlementService::PostRoomAction(const HttpRequest& request, const Caller& caller,
                                       uint64_t room_id, const std::string& action, ReplyFn done) {
  const std::string path = "/v1/rooms/" + std::to_string(room_id) + ":" + action;
  if (!caller.admin) {
    return done(ProblemReply(ErrorCode::kUnauthenticated, action + " needs the admin token", path));
  }
  if (action == "release") {
    auto released = rooms_.ReleaseRoom(room_id);
    if (!released.ok()) return done(FailureReply(released.status(), path));
    const Answer* answer = AnswerOf(kReleaseAnswers, released->status);
    if (answer && answer->success) {
      room_actions_.Add(std::string(answer->label));
      spdlog::info("room={}: released to a pending settlement ({} players freed)", room_id,
                   released->players_released);
    }
    v1::RoomRelease reply;
    reply.set_room_id(room_id);
    reply.set_released_at_ms(released->released_at_ms);
    reply.set_players_released(released->players_released);
    return done(AnswerReply(answer, "release", {}, reply, request, path));
  }

  // abort: {"reason": "..."}
  const auto format = wire::FormatOfContentType(request.content_type);
  if (!format) {
    return done(ProblemReply(ErrorCode::kUnsupportedMediaType,
                             "send application/x-protobuf or application/json", path));
  }
  v1::RoomAbort abort;
  if (Status decoded = wire::DecodeBody(request.body, *format, &abort); !decoded.ok()) {
    return done(ProblemReply(server::ProblemOfUndecodable(decoded), decoded.message(), path));
  }
  if (abort.reason().empty()) {
    return done(ProblemReply(ErrorCode::kInvalidArgument, "reason is required", path));
  }
  auto room = rooms_.GetRoom(room_id);
  if (!room.ok()) return done(FailureReply(room.status(), path));
  if (room->has_value()) return AbortRoom(request, **room, abort.reason(), std::move(done));

  // Not allocated: settled already (by its node, or by an earlier abort), or unknown.
  auto receipt = receipts_.GetReceipt(room_id, std::nullopt);
  if (!receipt.ok()) return done(FailureReply(receipt.status(), path));
  if (receipt->has_value()) {
    if ((*receipt)->outcome() != v1::ABORTED) {
      return done(ProblemReply(ErrorCode::kOutcomeConflict,
                               "the room was already settled with outcome SETTLED", path));
    }
    v1::SettlementReceipt r = **receipt;
    r.set_duplicate(true);
    return done(MessageReply(200, r, request));
  }
  auto expired = receipts_.ReceiptExpired(room_id, std::nullopt);
  if (!expired.ok()) return done(FailureReply(expired.status(), path));
  if (*expired) {
    return done(ProblemReply(ErrorCode::kOriginalExpired,
                             "the room was settled, and its receipt is past retention", path));
  }
  done(ProblemReply(ErrorCode::kRoomUnknown, "the room is not allocated", path));
}

void SettlementService::AbortRoom(const HttpRequest& request, const AllocatedRoom& room,
                                  const std::string& reason, ReplyFn done) {
  const std::string path = "/v1/rooms/" + std::to_string(room.room_id) + ":abort";
  v1::BattleResult result = AbortResult(room, reason);
  if (Status valid = wire::ValidateResult(result); !valid.ok()) {
    return done(ProblemReply(ErrorCode::kInvalidArgument, valid.message(), path));
  }
  SettlementScheduler::Attempt attempt;
  attempt.fingerprint = Fingerprint(result);
  attempt.node_id = room.node_id;
  attempt.result = std::move(result);
  attempt.finish = [this, done = std::move(done), path, room = room.room_id, node = room.node_id,
                    format = HttpRequest{"", "", request.content_type, request.accept, "", ""}](
                       const Result<SettleOutcome>& outcome) {
    if (outcome.ok() && outcome->status == SettleStatus::kSettled) {
      room_actions_.Add("abort");
      spdlog::warn("room={} node={}: aborted by an operator as match {}", room, node,
                   outcome->receipt.match_id());
    }
    HttpReply reply = SettlementReply(format, outcome, room);
    done(std::move(reply));
  };
  std::vector<SettlementScheduler::Attempt> one;
  one.push_back(std::move(attempt));
  scheduler_->Settle(std::move(one));
}

}  // namespace verdict::lobby
