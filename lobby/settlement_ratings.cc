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

// By (mode, player), both kept by the caller: the rating as the rooms so far left it, and the
// counts added.
using TotalsByPlayer =
    std::unordered_map<std::pair<std::string_view, std::string_view>, PlayerTotals, PairHash>;

constexpr double kMsPerDay = 86'400'000;

// `rating`, `seat`'s, aged by the days from its idle_since_ms to `now_ms`: how an idle player's
// uncertainty has grown by the time its next match is rated. A rating Idle refuses (stored beyond
// today's bounds) is rated as it is.
rating::Rating Aged(const rating::RatingSystem& system, const rating::Rating& rating,
                    const SeatRatings& seat, int64_t now_ms) {
  if (!seat.idle_since_ms || now_ms <= *seat.idle_since_ms) return rating;
  auto aged = system.Idle(rating, static_cast<double>(now_ms - *seat.idle_since_ms) / kMsPerDay);
  return aged.ok() ? *aged : rating;
}

// One room's teams as placed, each player rated from its rating at allocation, and what its
// system made of them.
struct RoomRating {
  std::vector<uint32_t> ranks;                     // each team's placement
  std::vector<rating::PlacedTeam> teams;           // empty for an ABORTED room
  std::vector<std::pair<size_t, size_t>> place;    // each player's (team, index in the team)
  std::vector<std::vector<rating::Rating>> after;  // by team, when `rated`
  bool rated = false;
};

// Rates `room`, whose players' lines as read are `read` (in the result's order; null where a line
// is missing). A room that is not rated, or whose rating fails, says so in the log and keeps its
// ratings (`rated` false).
RoomRating RateRoom(const RoomToRate& room, const std::vector<const SeatRatings*>& read) {
  const v1::BattleResult& result = *room.result;
  const rating::RatingSystem& system = *room.system;
  const bool settled = result.outcome() == v1::SETTLED;
  RoomRating out;
  out.ranks = wire::RanksOf(result);
  out.teams.resize(out.ranks.size());
  for (size_t t = 0; t < out.ranks.size(); ++t) out.teams[t].rank = out.ranks[t];
  for (int i = 0; i < result.players_size() && settled; ++i) {
    const v1::PlayerResult& p = result.players(i);
    rating::PlacedTeam& team = out.teams[p.team() - 1];
    out.place.emplace_back(p.team() - 1, team.players.size());
    const rating::Rating from =
        read[i] && read[i]->allocation
            ? (room.rated ? Aged(system, *read[i]->allocation, *read[i], room.settled_at_ms)
                          : *read[i]->allocation)
            : system.Initial();
    team.players.push_back({from, p.has_share() ? p.share() : 1.0});
  }
  if (!settled || !room.rated) return out;
  if (std::any_of(read.begin(), read.end(), [](const SeatRatings* s) { return !s; })) {
    spdlog::error(
        "room={} mode={}: a player's ratings were not read; recorded without moving any rating",
        result.room_id(), room.mode);
    return out;
  }
  if (Status ok = rating::CheckRoom(system, out.teams); !ok.ok()) {
    spdlog::error("room={} mode={}: recorded without moving any rating: {}", result.room_id(),
                  room.mode, ok.message());
    return out;
  }
  auto rate = system.Rate(out.teams);
  if (!rate.ok()) {
    spdlog::error("room={} mode={}: recorded without moving any rating: {}", result.room_id(),
                  room.mode, rate.status().ToString());
    return out;
  }
  out.after = std::move(*rate);
  out.rated = true;
  return out;
}

// Records `room`'s seats in `call`, each player's change applied to the rating the player has when
// the room's turn comes (`totals`, as the rooms before left it), and adds the room to the totals.
void RecordRoom(const RoomToRate& room, const std::vector<const SeatRatings*>& read,
                const RoomRating& rating, TotalsByPlayer& totals, RatedCall& call) {
  const v1::BattleResult& result = *room.result;
  const rating::RatingSystem& system = *room.system;
  const bool settled = result.outcome() == v1::SETTLED;
  for (int i = 0; i < result.players_size(); ++i) {
    const v1::PlayerResult& p = result.players(i);
    auto [total, first] = totals.try_emplace({room.mode, p.player_id()});
    PlayerTotals& t = total->second;
    if (first) {
      t.mode = room.mode;
      t.player_id = p.player_id();
      t.rating = read[i] && read[i]->current ? *read[i]->current : system.Initial();
      if (settled && room.rated && read[i]) {
        t.rating = Aged(system, t.rating, *read[i], room.settled_at_ms);
      }
    }
    RatedSeat seat{result.room_id(), &p, 0, "aborted", t.rating, t.rating};
    if (settled) {
      seat.rank = rating.ranks[p.team() - 1];
      seat.result = ResultOf(seat.rank, rating.ranks);
      if (rating.rated) {
        const auto [team, k] = rating.place[i];
        seat.after = rating::ApplyChange(seat.before, rating.teams[team].players[k].rating,
                                         rating.after[team][k]);
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

}  // namespace

RatedCall RateRooms(const std::vector<RoomToRate>& rooms, const std::vector<SeatRatings>& seats) {
  // Where a test arms `hang`: a rating step that never ends, inside the settlement's transaction.
  CheckFailpoint("settle.rate");
  std::unordered_map<std::pair<uint64_t, std::string_view>, const SeatRatings*, PairHash>
      seat_of;  // by (room, player)
  seat_of.reserve(seats.size());
  for (const SeatRatings& s : seats) seat_of[{s.room_id, s.player_id}] = &s;

  std::vector<const RoomToRate*> order;
  order.reserve(rooms.size());
  for (const RoomToRate& r : rooms) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const RoomToRate* a, const RoomToRate* b) {
    return a->result->room_id() < b->result->room_id();
  });

  RatedCall call;
  call.seats.reserve(seats.size());
  TotalsByPlayer totals;
  totals.reserve(seats.size());
  std::vector<const SeatRatings*> read;
  for (const RoomToRate* room : order) {
    // The room's players as read, in the result's order.
    const v1::BattleResult& result = *room->result;
    read.clear();
    for (const v1::PlayerResult& p : result.players()) {
      auto found = seat_of.find({result.room_id(), p.player_id()});
      read.push_back(found == seat_of.end() ? nullptr : found->second);
    }
    RecordRoom(*room, read, RateRoom(*room, read), totals, call);
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
