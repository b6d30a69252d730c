// The rating step of a settlement (lobby/settlement_ratings.h) without a database: a room whose
// rating system fails is recorded with its ratings unchanged, and the other rooms of the call are
// rated as ever. Pure computation.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

TEST(RateRoomsTest, ARoomWhoseSystemFailsIsRecordedUnchangedAndTheOthersAreRated) {
  const FailingSystem failing;
  auto elo = rating::MakeRatingSystem(rating::SystemSpec{"elo", "", {}});
  ASSERT_TRUE(elo.ok());
  const v1::BattleResult stuck = OneOnOne(1, "a", "b");
  const v1::BattleResult fine = OneOnOne(2, "c", "d");
  const std::vector<RoomToRate> rooms{{&stuck, "broken", &failing, true},
                                      {&fine, "default", elo->get(), true}};
  const rating::Rating r1500{.value = 1500};
  const std::vector<SeatRatings> seats{{1, "a", r1500, r1500},
                                       {1, "b", r1500, r1500},
                                       {2, "c", r1500, r1500},
                                       {2, "d", r1500, r1500}};
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

}  // namespace
}  // namespace verdict::lobby
