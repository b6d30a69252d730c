// Validation of the bodies the lobby accepts: a RoomAllocation or a BattleResult is OK or
// INVALID_ARGUMENT naming the field that is wrong. The node checks results with the same functions
// before it stores them, so that nothing it accepts is bound to be refused by the lobby. No I/O;
// thread-safe. Fuzzed by tests/fuzz.
//
// The shape of a room (docs/lobby.md, "Rooms and results"): teams numbered 1 to T, 2 <= T <=
// kMaxTeams, each with at least one seat, at most kMaxPlayers seats in all, each player once. A
// mode may narrow it (the lobby checks that against the mode's declaration). A SETTLED result
// places every team: its `placements` rank each team of the roster once, 1 to T (1 best, equal
// ranks tie; the best rank given is 1), or, for two teams, `winner_team` does (1, 2, or 0 for a
// draw). One of the two, said explicitly: a result that names neither is refused in every wire
// format, since "no winner" is not a draw.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/wire.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::wire {

static_assert(kMaxPlayers >= kMaxTeams, "a room of kMaxTeams teams needs as many seats");

// A player id's bytes: 1 to 64 of UTF-8, without NUL.
inline constexpr size_t kMaxPlayerIdBytes = 64;

Status ValidateAllocation(const v1::RoomAllocation& allocation);

// The one check of a result, whatever brought it: the node's ingest (JSON or protobuf),
// `verdict-node enqueue`, a room's vote and conclusion, the lobby's endpoints. A SETTLED result
// names its placements or its winner_team, never both and never neither: winner_team is `optional`
// in the schema, so an explicit 0 (a draw) is told apart from an absent one in protobuf as in JSON.
Status ValidateResult(const v1::BattleResult& result);

// The parts, for those who check an input before they build a whole message from it (a node's
// id at start, a room's statistics as the host records them): the same rules, one home.
Status ValidateNodeId(const std::string& node_id);
Status ValidatePlayerId(std::string_view player_id);
// A mode's name: 1 to 64 of [a-z0-9._-], starting with a letter or a digit.
Status ValidateModeName(std::string_view mode);
// One player of a result; its team is checked against the room's by ValidateResult.
Status ValidatePlayerResult(const v1::PlayerResult& player);

// The placements a valid SETTLED result means, one rank per team, team 1 first: `placements` as
// given, or what `winner_team` says of two teams. Empty for an ABORTED result.
std::vector<uint32_t> RanksOf(const v1::BattleResult& result);

}  // namespace verdict::wire
