// The "players" member of a battle.settled event (docs/lobby.md, "Events"), as JSON text. The
// lobby builds it once per room and verdict_settle_write stores it as it is: built in the write
// by jsonb functions, one object of eleven members per player, it cost a quarter of a drain's
// database time (bench/RESULTS.md, "The event's players, built once"). The text is the value the
// jsonb functions built: each number as PostgreSQL turns a double precision into jsonb (the
// shortest text that reads back as the same double; NaN and the infinities as strings), the
// players in byte order of their ids, and Elo's rounded elo_before and elo_after; each object's
// members in the order jsonb keeps them, which is also the order the feed serves them in.
#pragma once

#include <string>
#include <vector>

#include "lobby/settlement_ratings.h"

namespace verdict::lobby {

// The players of one room, any order, as a JSON array; `elo`: the room's mode rates by Elo.
std::string EventPlayersJson(std::vector<const RatedSeat*> seats, bool elo);

}  // namespace verdict::lobby
