#include "lobby/settlement_ratings.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"
#include "proto/validation.h"

namespace verdict::lobby {
namespace {

// What a placement means for a player's counts: first alone is a win, first beside another team
// a draw, anything below first a loss (two teams: exactly win, draw and loss).
const char* ResultOf(uint32_t rank, const std::vector<uint32_t>& ranks) {
  if (rank != 1) return "loss";
  return std::count(ranks.begin(), ranks.end(), 1u) == 1 ? "win" : "draw";
}

// A hash of two keys: a call rates some thousands of seats, each looked up by room and player,
// and each player's totals by mode and player.
struct PairHash {
  template <typename A, typename B>
  size_t operator()(const std::pair<A, B>& key) const {
    const size_t a = std::hash<A>()(key.first);
    return a ^ (std::hash<B>()(key.second) + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  }
};

}  // namespace

RatedCall RateRooms(const std::vector<RoomToRate>& rooms, const std::vector<SeatRatings>& seats) {
  // Where a test arms `hang`: a rating step that never ends, inside the settlement's transaction.
  CheckFailpoint("settle.rate");
  std::unordered_map<std::pair<uint64_t, std::string_view>, const SeatRatings*, PairHash>
      seat_of;  // by (room, player)
  seat_of.reserve(seats.size());
  for (const SeatRatings& s : seats) seat_of[{s.room_id, s.player_id}] = &s;

  std::vector<const RoomToRate*> order;
  for (const RoomToRate& r : rooms) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const RoomToRate* a, const RoomToRate* b) {
    return a->result->room_id() < b->result->room_id();
  });

  RatedCall call;
  call.seats.reserve(seats.size());
  // By (mode, player), both kept by the caller: the rating as the rooms so far left it, and the
  // counts added.
  std::unordered_map<std::pair<std::string_view, std::string_view>, PlayerTotals, PairHash> totals;
  totals.reserve(seats.size());
  for (const RoomToRate* room : order) {
    const v1::BattleResult& result = *room->result;
    const rating::RatingSystem& system = *room->system;
    const bool settled = result.outcome() == v1::SETTLED;
    const std::vector<uint32_t> ranks = wire::RanksOf(result);

    // The room's players as read, in the result's order, each on its team as placed.
    std::vector<const SeatRatings*> read;
    for (const v1::PlayerResult& p : result.players()) {
      auto found = seat_of.find({result.room_id(), p.player_id()});
      read.push_back(found == seat_of.end() ? nullptr : found->second);
    }
    const bool complete = std::none_of(read.begin(), read.end(), [](auto* s) { return !s; });
    std::vector<rating::PlacedTeam> teams(ranks.size());
    for (size_t t = 0; t < ranks.size(); ++t) teams[t].rank = ranks[t];
    std::vector<std::pair<size_t, size_t>> place;  // each player's (team, index in the team)
    for (int i = 0; i < result.players_size() && settled; ++i) {
      const v1::PlayerResult& p = result.players(i);
      rating::PlacedTeam& team = teams[p.team() - 1];
      place.emplace_back(p.team() - 1, team.players.size());
      const rating::Rating from =
          read[i] && read[i]->allocation ? *read[i]->allocation : system.Initial();
      team.players.push_back({from, p.has_share() ? p.share() : 1.0});
    }
    bool rated = settled && room->rated && complete;
    if (rated) {
      if (Status ok = rating::CheckRoom(system, teams); !ok.ok()) {
        spdlog::error("room={} mode={}: recorded without moving any rating: {}", result.room_id(),
                      room->mode, ok.message());
        rated = false;
      }
    } else if (settled && room->rated) {
      spdlog::error(
          "room={} mode={}: a player's ratings were not read; recorded without moving "
          "any rating",
          result.room_id(), room->mode);
    }
    std::vector<std::vector<rating::Rating>> after;
    if (rated) {
      auto rate = system.Rate(teams);
      if (rate.ok()) {
        after = std::move(*rate);
      } else {
        spdlog::error("room={} mode={}: recorded without moving any rating: {}", result.room_id(),
                      room->mode, rate.status().ToString());
        rated = false;
      }
    }

    for (int i = 0; i < result.players_size(); ++i) {
      const v1::PlayerResult& p = result.players(i);
      auto [total, first] = totals.try_emplace({room->mode, p.player_id()});
      PlayerTotals& t = total->second;
      if (first) {
        t.mode = room->mode;
        t.player_id = p.player_id();
        t.rating = read[i] && read[i]->current ? *read[i]->current : system.Initial();
      }
      RatedSeat seat{result.room_id(), &p, 0, "aborted", t.rating, t.rating};
      if (settled) {
        seat.rank = ranks[p.team() - 1];
        seat.result = ResultOf(seat.rank, ranks);
        if (rated) {
          const auto [team, k] = place[i];
          seat.after =
              rating::ApplyChange(seat.before, teams[team].players[k].rating, after[team][k]);
        }
        t.rating = seat.after;
        ++t.games;
        const std::string_view r = seat.result;
        t.wins += r == "win";
        t.losses += r == "loss";
        t.draws += r == "draw";
        t.placements += seat.rank;
      }
      t.displayed = system.Displayed(t.rating);
      call.seats.push_back(seat);
    }
  }
  call.players.reserve(totals.size());
  for (auto& [key, t] : totals) {
    if (t.games > 0) call.players.push_back(std::move(t));
  }
  std::sort(call.players.begin(), call.players.end(),
            [](const PlayerTotals& a, const PlayerTotals& b) {
              return std::tie(a.mode, a.player_id) < std::tie(b.mode, b.player_id);
            });
  return call;
}

}  // namespace verdict::lobby
