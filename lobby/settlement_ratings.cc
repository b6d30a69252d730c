#include "lobby/settlement_ratings.h"

#include <algorithm>
#include <map>
#include <utility>

namespace verdict::lobby {
namespace {

// What a two-team result means for one player: 0 is a draw, else the winning team.
const char* ResultOf(const v1::BattleResult& room, const v1::PlayerResult& player) {
  if (room.outcome() != v1::SETTLED) return "aborted";
  if (room.winner_team() == 0) return "draw";
  return room.winner_team() == player.team() ? "win" : "loss";
}

// The placement of each team: 1 is best, equal ranks tie (teams numbered from 1).
uint32_t RankOf(const v1::BattleResult& room, uint32_t team) {
  if (room.winner_team() == 0) return 1;
  return team == room.winner_team() ? 1 : 2;
}

}  // namespace

RatedCall RateRooms(const std::vector<RoomToRate>& rooms, const std::vector<SeatRatings>& seats) {
  std::map<std::pair<uint64_t, uint64_t>, const SeatRatings*> seat_of;  // (room, player)
  for (const SeatRatings& s : seats) seat_of[{s.room_id, s.player_id}] = &s;

  std::vector<const RoomToRate*> order;
  for (const RoomToRate& r : rooms) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const RoomToRate* a, const RoomToRate* b) {
    return a->result->room_id() < b->result->room_id();
  });

  RatedCall call;
  std::map<uint64_t, PlayerTotals> totals;  // by player: the rating as the rooms so far left it
  for (const RoomToRate* room : order) {
    const v1::BattleResult& result = *room->result;
    // The room's seats as read, in the result's order; a room with a seat missing is not rated.
    std::vector<const SeatRatings*> read;
    for (const v1::PlayerResult& p : result.players()) {
      auto found = seat_of.find({result.room_id(), p.player_id()});
      if (found == seat_of.end()) break;
      read.push_back(found->second);
    }
    if (read.size() != static_cast<size_t>(result.players_size())) continue;

    // Teams as placed, each player rated from the allocation's rating.
    std::map<uint32_t, size_t> team_index;  // team number -> index in `teams`
    std::vector<rating::PlacedTeam> teams;
    std::vector<std::pair<size_t, size_t>> place;  // each player's (team index, index in team)
    for (int i = 0; i < result.players_size(); ++i) {
      const uint32_t team = result.players(i).team();
      auto [it, fresh] = team_index.try_emplace(team, teams.size());
      if (fresh) teams.push_back({{}, RankOf(result, team)});
      place.emplace_back(it->second, teams[it->second].players.size());
      teams[it->second].players.push_back({read[i]->allocation, 1.0});
    }
    const bool rated = room->system != nullptr && result.outcome() == v1::SETTLED;
    std::vector<std::vector<rating::Rating>> after;
    if (rated) after = room->system->Rate(teams);

    for (int i = 0; i < result.players_size(); ++i) {
      const v1::PlayerResult& p = result.players(i);
      auto [total, first] = totals.try_emplace(p.player_id());
      if (first) {
        total->second.player_id = p.player_id();
        total->second.rating = read[i]->current;
      }
      RatedSeat seat{result.room_id(), &p, ResultOf(result, p), total->second.rating,
                     total->second.rating};
      if (rated) {
        const auto [t, k] = place[i];
        seat.after = rating::ApplyChange(seat.before, read[i]->allocation, after[t][k]);
      }
      total->second.rating = seat.after;
      if (result.outcome() == v1::SETTLED) {
        ++total->second.games;
        const std::string_view r = seat.result;
        total->second.wins += r == "win";
        total->second.losses += r == "loss";
        total->second.draws += r == "draw";
      }
      call.seats.push_back(seat);
    }
  }
  for (auto& [id, t] : totals) call.players.push_back(t);
  return call;
}

}  // namespace verdict::lobby
