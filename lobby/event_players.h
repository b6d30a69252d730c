// The "players" member of a battle.settled event (docs/lobby.md, "Events"), as JSON text. The
// lobby builds it once per room and verdict_settle_write stores it as it is, inside the event's
// json (migration 007): built in the write by jsonb functions, one object of eleven members per
// player, it cost a quarter of a drain's database time (bench/RESULTS.md, "The event's players,
// built once"). The text is what jsonb printed for the value the jsonb functions built, byte for
// byte: each number as jsonb prints a double precision (its shortest round-trip digits, in plain
// decimal notation; NaN and the infinities as strings), strings escaped as jsonb escapes them,
// the players in byte order of their ids, Elo's rounded elo_before and elo_after, each object's
// members in jsonb's key order with ", " and ": " between them.
#pragma once

#include <string>
#include <vector>

#include "lobby/settlement_ratings.h"

namespace verdict::lobby {

// The players of one room, any order, as a JSON array; `integer_elo`: the room's system reports
// integer Elo (rating::RatingSystem::ReportsIntegerElo), which the event then carries as
// elo_before and elo_after.
std::string EventPlayersJson(std::vector<const RatedSeat*> seats, bool integer_elo);

}  // namespace verdict::lobby
