// The rating step of a settlement (docs/design.md §5): between the statement that reads the
// ratings under the players' locks (verdict_settle_prepare) and the one that writes
// (verdict_settle_write), the rooms of one call are rated here, in room order, each by its mode's
// rating system (lobby/rating/rating_system.h). Each room is rated from its players' ratings at
// allocation (the compensation rule of docs/design.md §8), and its change is applied to the
// rating the player has when the room's turn comes: the one read, or, for a player in two rooms
// of the call (a released room and the player's next one), the one the earlier room left. So
// every match counts, each from the rating before it, and the chain of before and after through a
// player's matches in a mode is continuous. Pure functions: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lobby/rating/rating_system.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

// A player's line as verdict_settle_prepare read it under the locks: the ratings in the room's
// mode, or none (the player was new to the mode, now or at allocation: the system's initial).
struct SeatRatings {
  uint64_t room_id = 0;
  std::string player_id;
  std::optional<rating::Rating> current;     // the player's rating now
  std::optional<rating::Rating> allocation;  // the rating the room is rated from
  // Since when the rating has not aged (its last match, or the inactivity pass's last aging), in
  // ms since the epoch; none: it does not age (no match yet).
  std::optional<int64_t> idle_since_ms;
};

// One room the call writes: its result (validated, its roster the room's seats), its mode, the
// mode's system, and whether the mode is rated (a casual one records matches and moves nothing).
struct RoomToRate {
  const v1::BattleResult* result = nullptr;
  std::string mode;
  const rating::RatingSystem* system = nullptr;
  bool rated = true;
  int64_t settled_at_ms = 0;  // the call's time: a rating ages up to it before it is rated
};

// One player of one match: its line in match_players.
struct RatedSeat {
  uint64_t room_id = 0;
  const v1::PlayerResult* player = nullptr;
  uint32_t rank = 0;        // its team's placement; 0 in an ABORTED room
  const char* result = "";  // "win" (first alone), "draw" (first with others), "loss", "aborted"
  rating::Rating before;    // the player's rating in the mode before this match
  rating::Rating after;     // and after it
};

// What the call adds to one player in one mode: the rating it ends with, and its counts.
struct PlayerTotals {
  std::string mode;
  std::string player_id;
  rating::Rating rating;
  double displayed = 0;
  int games = 0, wins = 0, losses = 0, draws = 0;
  int64_t placements = 0;  // the ranks placed, summed
};

struct RatedCall {
  std::vector<RatedSeat> seats;       // room by room in room order, each room's players in order
  std::vector<PlayerTotals> players;  // one per (mode, player) with a SETTLED match, sorted
};

// Rates `rooms` (any order; rated in room-id order) from `seats` (every player of every room,
// any order). In a SETTLED room of a rated mode, a player's ratings, the one the room is rated
// from and the one its change lands on, first age by the days from the player's idle_since_ms to
// the room's settled_at_ms (RatingSystem::Idle: nothing for Elo or a mode that declares no
// aging), so that inactivity counts before the player's next match is rated. A room whose players
// are not all in `seats`, that its system cannot rate (rating::CheckRoom), or whose rating fails
// (an iteration at its bound: a bug), is recorded with its players' ratings unchanged, and logged
// as an error: the settlement goes on, and no room holds up the others. Every system's iterations
// are bounded, so this returns in a time bounded by the number of seats.
RatedCall RateRooms(const std::vector<RoomToRate>& rooms, const std::vector<SeatRatings>& seats);

}  // namespace verdict::lobby
