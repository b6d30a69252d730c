// The rating step of a settlement (docs/design.md §5): between the statement that reads the
// ratings under the players' locks (verdict_settle_prepare) and the one that writes
// (verdict_settle_write), the rooms of one call are rated here, in room order. Each room is rated
// from its players' ratings at allocation (the compensation rule of docs/design.md §8), and its
// change is applied to the rating the player has when the room's turn comes: the one read, or,
// for a player in two rooms of the call (a released room and the player's next one), the one the
// earlier room left. So every match counts, each from the rating before it, and the chain of
// before and after through a player's matches is continuous. Pure functions: any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "lobby/rating/rating_system.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

// A player's line as verdict_settle_prepare read it under the locks.
struct SeatRatings {
  uint64_t room_id = 0;
  uint64_t player_id = 0;
  rating::Rating current;     // the player's rating now
  rating::Rating allocation;  // the rating the room is rated from
};

// One room the call writes: its result (validated, its roster the room's seats) and the system
// that rates it (null when nothing moves: an ABORTED result).
struct RoomToRate {
  const v1::BattleResult* result = nullptr;
  const rating::RatingSystem* system = nullptr;
};

// One player of one match: its line in match_players.
struct RatedSeat {
  uint64_t room_id = 0;
  const v1::PlayerResult* player = nullptr;
  const char* result = "";  // "win", "loss", "draw" or "aborted"
  rating::Rating before;    // the player's rating before this match
  rating::Rating after;     // and after it
};

// What the call adds to one player: the rating it ends with, and its counts.
struct PlayerTotals {
  uint64_t player_id = 0;
  rating::Rating rating;
  int games = 0, wins = 0, losses = 0, draws = 0;
};

struct RatedCall {
  std::vector<RatedSeat> seats;       // room by room in room order, each room's players in order
  std::vector<PlayerTotals> players;  // one per distinct player, in player-id order
};

// Rates `rooms` (any order; rated in room-id order) from `seats` (every player of every room,
// any order). A player of a room missing from `seats` is a caller's bug: that room's players keep
// their ratings and the room is not counted for them.
RatedCall RateRooms(const std::vector<RoomToRate>& rooms, const std::vector<SeatRatings>& seats);

}  // namespace verdict::lobby
