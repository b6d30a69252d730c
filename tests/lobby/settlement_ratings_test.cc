// The rating step of a settlement (lobby/settlement_ratings.h) without a database: a room whose
// rating system fails is recorded with its ratings unchanged, and the other rooms of the call are
// rated as ever; a player's two rooms in one call are rated in room-id order, the second from the
// rating the first left. Pure computation.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "lobby/rating/elo.h"
#include "lobby/rating/rating_system.h"
#include "lobby/settlement_ratings.h"

namespace verdict::lobby {
namespace {

// A system whose every Rate fails, as one whose iteration reached its bound would.
class FailingSystem final : public rating::RatingSystem {
 public:
  const rating::SystemSpec& spec() const override { return spec_; }
  rating::Rating Initial() const override { return rating::Rating{.value = 1500}; }
  double Displayed(const rating::Rating& rating) const override { return rating.value; }
  Status Accepts(const std::vector<size_t>&) const override { return Status::Ok(); }
  Result<std::vector<std::vector<rating::Rating>>> Rate(
      const std::vector<rating::PlacedTeam>&) const override {
    return InternalError("an iteration reached its bound");
  }
  Result<rating::Prediction> Predict(
      const std::vector<std::vector<rating::Rating>>&) const override {
    return InternalError("an iteration reached its bound");
  }

 private:
  rating::SystemSpec spec_{"failing", "", {}};
};

// A settled 1v1 of players `a` (team 1, the winner) and `b`.
v1::BattleResult OneOnOne(uint64_t room, const std::string& a, const std::string& b) {
  v1::BattleResult r;
  r.set_room_id(room);
  r.set_outcome(v1::SETTLED);
  r.set_winner_team(1);
  v1::PlayerResult* first = r.add_players();
  first->set_player_id(a);
  first->set_team(1);
  v1::PlayerResult* second = r.add_players();
  second->set_player_id(b);
  second->set_team(2);
  return r;
}

// Elo as a mode declares it by default: K = 32, a new player at 1500.
std::unique_ptr<rating::RatingSystem> DefaultElo() {
  auto made = rating::MakeRatingSystem(rating::SystemSpec{std::string(rating::kEloSystem), "", {}});
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

TEST(RateRoomsTest, ARoomWhoseSystemFailsIsRecordedUnchangedAndTheOthersAreRated) {
  const FailingSystem failing;
  const auto elo = DefaultElo();
  ASSERT_NE(elo, nullptr);
  const v1::BattleResult stuck = OneOnOne(1, "a", "b");
  const v1::BattleResult fine = OneOnOne(2, "c", "d");
  const std::vector<RoomToRate> rooms{{&stuck, "broken", &failing, true, 0},
                                      {&fine, "default", elo.get(), true, 0}};
  const rating::Rating r1500{.value = 1500};
  const std::vector<SeatRatings> seats{{1, "a", r1500, r1500, std::nullopt},
                                       {1, "b", r1500, r1500, std::nullopt},
                                       {2, "c", r1500, r1500, std::nullopt},
                                       {2, "d", r1500, r1500, std::nullopt}};
  const RatedCall call = RateRooms(rooms, seats);
  ASSERT_EQ(call.seats.size(), 4u);
  // Room 1: the match and its counts are recorded, no rating moves.
  EXPECT_EQ(call.seats[0].after, r1500);
  EXPECT_EQ(call.seats[1].after, r1500);
  EXPECT_STREQ(call.seats[0].result, "win");
  // Room 2: rated as Elo rates it, 1500 v 1500 won: +16 and -16.
  EXPECT_EQ(call.seats[2].after.value, 1516);
  EXPECT_EQ(call.seats[3].after.value, 1484);
  ASSERT_EQ(call.players.size(), 4u);
  for (const PlayerTotals& t : call.players) EXPECT_EQ(t.games, 1) << t.player_id;
}

// Player a's released room (1) and a's next room (2), settled in one call that lists the later room
// first, each player's seats read in any order. Elo with K = 32 (A. Elo, "The Rating of
// Chessplayers, Past and Present", 1978; lobby/rating/elo.h): E_a = 1 / (1 + 10^((R_b - R_a) /
// 400)), and a moves by K (S_a - E_a), rounded to a whole number half away from zero.
//   Room 1, rated from the ratings at allocation: a 1500 beats b 1500, E = 1/2: a +16, b -16.
//   Room 2, allocated while room 1 was unsettled: a 1500 loses to c 1600,
//   E_a = 1 / (1 + 10^(100 / 400)) = 0.359935..., K (0 - E_a) = -11.5179...: a -12, c +12.
// In room-id order, room 2's change applies to the rating room 1 left: a 1516 -> 1504. Rated in
// the batch's order instead, room 2 would take a from 1500 to 1488, and room 1 from 1488 to 1504.
TEST(RateRoomsTest, APlayersTwoRoomsInOneCallChainInRoomIdOrder) {
  const auto elo = DefaultElo();
  ASSERT_NE(elo, nullptr);
  const v1::BattleResult released = OneOnOne(1, "a", "b");
  const v1::BattleResult next = OneOnOne(2, "c", "a");
  const std::vector<RoomToRate> rooms{{&next, "default", elo.get(), true, 0},
                                      {&released, "default", elo.get(), true, 0}};
  const rating::Rating r1500{.value = 1500};
  const rating::Rating r1600{.value = 1600};
  // Each player's current rating and the one the room is rated from, as the prepare step reads
  // them under the locks: a's current rating is the same in both its rooms' lines.
  const std::vector<SeatRatings> seats{{2, "a", r1500, r1500, std::nullopt},
                                       {1, "b", r1500, r1500, std::nullopt},
                                       {2, "c", r1600, r1600, std::nullopt},
                                       {1, "a", r1500, r1500, std::nullopt}};
  const RatedCall call = RateRooms(rooms, seats);

  ASSERT_EQ(call.seats.size(), 4u);
  const auto seat = [&call](size_t i) {
    const RatedSeat& s = call.seats[i];
    return std::tuple(s.room_id, s.player->player_id(), s.before.value, s.after.value);
  };
  EXPECT_EQ(seat(0), std::tuple(1u, "a", 1500.0, 1516.0));
  EXPECT_EQ(seat(1), std::tuple(1u, "b", 1500.0, 1484.0));
  EXPECT_EQ(seat(2), std::tuple(2u, "c", 1600.0, 1612.0));
  EXPECT_EQ(seat(3), std::tuple(2u, "a", 1516.0, 1504.0));
  EXPECT_EQ(call.seats[3].before, call.seats[0].after);

  ASSERT_EQ(call.players.size(), 3u);
  const PlayerTotals& a = call.players[0];
  EXPECT_EQ(a.player_id, "a");
  EXPECT_EQ(a.rating.value, 1504);
  EXPECT_EQ(a.displayed, 1504);
  EXPECT_EQ(std::tuple(a.games, a.wins, a.losses, a.draws, a.placements),
            std::tuple(2, 1, 1, 0, int64_t{3}));
  EXPECT_EQ(call.players[1].rating.value, 1484);
  EXPECT_EQ(call.players[2].rating.value, 1612);
}

// A player idle for 120 days in a Glicko-2 mode of one-day periods is rated from its rating aged
// by Glickman's step 6 applied period by period, phi' = sqrt(phi^2 + sigma^2) (M. E. Glickman,
// "Example of the Glicko-2 system", step 6): RD 50, sigma 0.06, after 120 periods 124.6469 (the
// reference value of issue 51). Its opponent, whose last match was the same day, does not age;
// nor does anyone in a room that is not rated.
TEST(RateRoomsTest, AnIdlePlayersRatingAgesBeforeItsNextMatchIsRated) {
  auto glicko = rating::MakeRatingSystem(rating::SystemSpec{"glicko2", "", {{"period_days", 1}}});
  ASSERT_TRUE(glicko.ok()) << glicko.status().ToString();
  const v1::BattleResult match = OneOnOne(1, "idle", "busy");
  const v1::BattleResult casual = OneOnOne(2, "idle2", "busy2");
  const int64_t day_ms = 86'400'000;
  const int64_t now_ms = 1'000 * day_ms;
  const std::vector<RoomToRate> rooms{{&match, "chess", glicko->get(), true, now_ms},
                                      {&casual, "casual", glicko->get(), false, now_ms}};
  const rating::Rating settled{.value = 1500, .deviation = 50, .volatility = 0.06};
  const std::vector<SeatRatings> seats{{1, "idle", settled, settled, now_ms - 120 * day_ms},
                                       {1, "busy", settled, settled, now_ms - day_ms / 2},
                                       {2, "idle2", settled, settled, now_ms - 120 * day_ms},
                                       {2, "busy2", settled, settled, now_ms}};
  const RatedCall call = RateRooms(rooms, seats);
  ASSERT_EQ(call.seats.size(), 4u);
  EXPECT_NEAR(call.seats[0].before.deviation, 124.6469, 1e-4);
  EXPECT_EQ(call.seats[1].before, settled) << "half a period: not a whole one";
  EXPECT_EQ(call.seats[2].before, settled) << "a casual mode moves nothing";
  // Rated from the aged rating: the idle player, the less certain of the two, moves further.
  EXPECT_GT(call.seats[0].after.value - 1500, 1500 - call.seats[1].after.value);
}

}  // namespace
}  // namespace verdict::lobby
