// Builders for test BattleResults. Header-only; no state.
#pragma once

#include <cstdint>
#include <string>

#include "verdict/v1/verdict.pb.h"

namespace verdict::testing {

// A settled ten-player result for `room_id`: players room_id*10+1 … +10, teams 1 and 2,
// team 1 wins.
inline v1::BattleResult MakeResult(uint64_t room_id, int64_t ended_at_ms = 1'700'000'000'000,
                                   const std::string& node_id = "node-a") {
  v1::BattleResult r;
  r.set_room_id(room_id);
  r.set_outcome(v1::SETTLED);
  r.set_winner_team(1);
  r.set_ended_at_ms(ended_at_ms);
  r.set_node_id(node_id);
  r.set_replay_path("replays/" + std::to_string(room_id) + ".bin");
  for (uint32_t i = 1; i <= 10; ++i) {
    v1::PlayerResult* p = r.add_players();
    p->set_player_id(std::to_string(room_id * 10 + i));
    p->set_team(i <= 5 ? 1 : 2);
    p->set_kills(i);
    p->set_deaths(10 - i);
    p->set_score(100 * i);
  }
  return r;
}

// Seats players first_player … first_player + count - 1 in `room_id` for `node_id`: the first
// half on team 1, the rest on team 2. MakeAllocation(r, node, r * 10 + 1, 10) is the roster of
// MakeResult(r, …, node).
inline v1::RoomAllocation MakeAllocation(uint64_t room_id, const std::string& node_id,
                                         uint64_t first_player, uint32_t count) {
  v1::RoomAllocation a;
  a.set_room_id(room_id);
  a.set_node_id(node_id);
  for (uint32_t i = 0; i < count; ++i) {
    v1::Seat* seat = a.add_seats();
    seat->set_player_id(std::to_string(first_player + i));
    seat->set_team(i < count / 2 ? 1 : 2);
  }
  return a;
}

// A SETTLED result of allocation `a`'s roster, every player on the team of its seat, `winner_team`
// winning (0: a draw).
inline v1::BattleResult ResultOf(const v1::RoomAllocation& a, uint32_t winner_team) {
  v1::BattleResult r;
  r.set_room_id(a.room_id());
  r.set_outcome(v1::SETTLED);
  r.set_winner_team(winner_team);
  r.set_ended_at_ms(1'700'000'000'000);
  r.set_node_id(a.node_id());
  for (const auto& seat : a.seats()) {
    v1::PlayerResult* p = r.add_players();
    p->set_player_id(seat.player_id());
    p->set_team(seat.team());
  }
  return r;
}

}  // namespace verdict::testing
