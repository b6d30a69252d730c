// How the lobby answers each status of a store call: one table per call, each status once, saying
// whether it is answered with the call's message (and its HTTP status) or refused with a problem
// (its code and detail). The endpoints (settlement_service.cc, room_actions.cc,
// ladder_endpoints.cc) answer through these tables, and the service's tests iterate them
// (tests/lobby/service_test.cc), so a status without its answer fails there, not in production.
// Constant data and pure functions: any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lobby/settlement_store.h"
#include "server/problem.h"

namespace verdict::lobby {

// The values of one request that a problem's detail may name, in braces: {room}, {player},
// {mode}, {outcome} (the outcome an earlier settlement of the room had), {detail} (the store's
// own explanation).
struct AnswerFields {
  std::string room = {};
  std::string player = {};
  std::string mode = {};
  std::string outcome = {};
  std::string detail = {};
};

// One status's answer: the call's message at HTTP status `success`, or, when `success` is 0, the
// problem `problem` with `detail`.
struct Answer {
  int success = 0;
  std::string_view label = {};  // a success's label in the endpoint's counter, if it counts them
  server::ErrorCode problem = server::ErrorCode::kInternal;
  std::string_view detail = {};  // the problem's, its fields in braces (FillDetail)
};

template <typename E>
struct StatusAnswer {
  E status;
  Answer answer;
};

// The problem's detail of `answer` with `fields` in place of their names.
std::string FillDetail(std::string_view detail, const AnswerFields& fields);

// The HTTP status `answer` is sent with, and the label an endpoint counts it by: a problem's
// code for a problem.
int HttpStatusOf(const Answer& answer);
std::string_view LabelOf(const Answer& answer);

// The answer to `status` in `table`; nullptr when the table has none (a status added without its
// answer: the endpoint answers INTERNAL, and the service's tests fail).
template <typename E, size_t N>
const Answer* AnswerOf(const StatusAnswer<E> (&table)[N], E status) {
  for (const StatusAnswer<E>& entry : table) {
    if (entry.status == status) return &entry.answer;
  }
  return nullptr;
}

using server::ErrorCode;

// The detail of a settlement whose room's receipt is past retention: the settlement's answer,
// and that of a read of the receipt (GET /v1/settlements/{room_id}).
inline constexpr std::string_view kOriginalExpiredDetail =
    "the room was settled, and its receipt is past retention: the result was delivered before";

// POST /v1/rooms, counted in verdict_lobby_allocations_total.
inline constexpr StatusAnswer<AllocateStatus> kAllocationAnswers[] = {
    {AllocateStatus::kAllocated, {.success = 201, .label = "OK"}},
    {AllocateStatus::kDuplicate, {.success = 200, .label = "DUPLICATE"}},
    {AllocateStatus::kPlayerBusy,
     {.problem = ErrorCode::kPlayerBusy, .detail = "player {player} is already in another battle"}},
    {AllocateStatus::kRoomIdReused,
     {.problem = ErrorCode::kRoomIdReused,
      .detail = "room {room} was settled before; room ids are never reused"}},
    {AllocateStatus::kModeUnknown,
     {.problem = ErrorCode::kInvalidArgument, .detail = "mode: {detail}"}},
    {AllocateStatus::kShapeRefused,
     {.problem = ErrorCode::kInvalidArgument, .detail = "seats: {detail}"}},
    {AllocateStatus::kRoomExists,
     {.problem = ErrorCode::kRoomExists,
      .detail = "room {room} is already allocated differently; room ids are never reused"}},
    {AllocateStatus::kModeClosed, {.problem = ErrorCode::kModeClosed, .detail = "{detail}"}},
};

// POST /v1/settlements, each item of :batch, and :abort, counted in
// verdict_lobby_settlements_total. Every status has its own answer: one that says to retry (busy)
// is never a final refusal, which a node would dead-letter.
inline constexpr StatusAnswer<SettleStatus> kSettlementAnswers[] = {
    {SettleStatus::kSettled, {.success = 200, .label = "OK"}},
    {SettleStatus::kDuplicate, {.success = 200, .label = "DUPLICATE"}},
    {SettleStatus::kRoomUnknown,
     {.problem = ErrorCode::kRoomUnknown, .detail = "the room is not allocated to this node"}},
    {SettleStatus::kOutcomeConflict,
     {.problem = ErrorCode::kOutcomeConflict,
      .detail = "the room was already settled with outcome {outcome}"}},
    {SettleStatus::kIdempotencyMismatch,
     {.problem = ErrorCode::kIdempotencyMismatch,
      .detail = "the room was already settled with a different payload"}},
    {SettleStatus::kRosterMismatch,
     {.problem = ErrorCode::kRosterMismatch,
      .detail = "the players and teams differ from the room's allocated roster"}},
    {SettleStatus::kBusy,
     {.problem = ErrorCode::kUnavailable,
      .detail = "another transaction holds the room; retry it"}},
    {SettleStatus::kOriginalExpired,
     {.problem = ErrorCode::kOriginalExpired, .detail = kOriginalExpiredDetail}},
};

// POST /v1/rooms/{room_id}:release, counted in verdict_lobby_room_actions_total.
inline constexpr StatusAnswer<ReleaseStatus> kReleaseAnswers[] = {
    {ReleaseStatus::kReleased, {.success = 200, .label = "release"}},
    {ReleaseStatus::kRoomUnknown,
     {.problem = ErrorCode::kRoomUnknown, .detail = "the room is not allocated"}},
    {ReleaseStatus::kBusy,
     {.problem = ErrorCode::kUnavailable,
      .detail = "another transaction holds the room; retry it"}},
};

// PUT /v1/modes/{mode}.
inline constexpr StatusAnswer<DeclareStatus> kDeclareAnswers[] = {
    {DeclareStatus::kCreated, {.success = 201}},
    {DeclareStatus::kUpdated, {.success = 200}},
    {DeclareStatus::kUnchanged, {.success = 200}},
    {DeclareStatus::kInUse,
     {.problem = ErrorCode::kModeInUse,
      .detail = "mode {mode} has rooms, so its declaration is fixed: declare a new mode (a new "
                "season is a new mode)"}},
    {DeclareStatus::kSeedUnknown,
     {.problem = ErrorCode::kInvalidArgument,
      .detail = "seed_from.mode: mode {detail} is not declared"}},
    {DeclareStatus::kSeedSystemDiffers,
     {.problem = ErrorCode::kInvalidArgument,
      .detail = "seed_from.mode: mode {detail} rates by another system than mode {mode}"}},
    {DeclareStatus::kModeUnknown,
     {.problem = ErrorCode::kNotFound, .detail = "mode {mode} is not declared"}},
};

// PUT /v1/players/{player_id}/ratings/{mode}.
inline constexpr StatusAnswer<ImportStatus> kImportAnswers[] = {
    {ImportStatus::kImported, {.success = 200}},
    {ImportStatus::kPlayerBusy,
     {.problem = ErrorCode::kPlayerBusy,
      .detail = "player {player} is in a room: a room is rated from the rating it was allocated "
                "with, so a rating is imported between rooms"}},
    {ImportStatus::kModeUnknown,
     {.problem = ErrorCode::kNotFound, .detail = "mode {mode} is not declared"}},
};

// POST /v1/matches/{match_id}:void and POST /v1/rooms/{room_id}:void, counted in
// verdict_lobby_voids_total; {detail} names the match (or the room) and, for kTooLarge, its size.
inline constexpr StatusAnswer<VoidStatus> kVoidAnswers[] = {
    {VoidStatus::kVoided, {.success = 200, .label = "OK"}},
    {VoidStatus::kDuplicate, {.success = 200, .label = "DUPLICATE"}},
    {VoidStatus::kMatchUnknown,
     {.problem = ErrorCode::kNotFound,
      .detail = "{detail} is not in the history: never settled, or past retention"}},
    {VoidStatus::kNotVoidable,
     {.problem = ErrorCode::kNotVoidable,
      .detail = "{detail} was ABORTED: it moved no rating and counted no game, so there is "
                "nothing to void"}},
    {VoidStatus::kTooLarge, {.problem = ErrorCode::kVoidTooLarge, .detail = "{detail}"}},
};

}  // namespace verdict::lobby
