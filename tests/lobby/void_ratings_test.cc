// The rating step of a void (lobby/void_ratings.h), without a database: the compensation rule's
// arithmetic worked by hand for Elo, and a replay equal to the same matches rated by the system
// without the voided one.
#include "lobby/void_ratings.h"

#include <gtest/gtest.h>

#include "lobby/rating/rating_system.h"

namespace verdict::lobby {
namespace {

std::unique_ptr<rating::RatingSystem> System(const std::string& name) {
  auto made = rating::MakeRatingSystem({name, "", {}});
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(*made);
}

HistorySeat Seat(uint64_t match, const std::string& player, uint32_t team, uint32_t rank,
                 const std::string& result, rating::Rating before, rating::Rating after) {
  return {match, player, team, rank, result, before, after};
}

rating::Rating Elo(double value) { return {value, 0, 0}; }

// Elo, K = 32 (docs/modes.md, "elo"). Match 1: a beats b from 1500 each, 1516 and 1484. Match 2:
// c (1500) beats a (1516), a's expected score 1/(1 + 10^(-16/400)) = 0.52298, so a moves by
// round(-32 * 0.52298) = -17 to 1499 and c to 1517. Compensating match 1 moves a and b by
// before - after from where they stand: a 1499 - 16 = 1483, b 1484 + 16 = 1500. a loses a win,
// b a loss; c is not touched.
TEST(VoidRatingsTest, CompensationMovesEachPlayerByTheInverseOfItsChange) {
  const auto elo = System("elo");
  const std::vector<HistorySeat> voided = {
      Seat(1, "a", 1, 1, "win", Elo(1500), Elo(1516)),
      Seat(1, "b", 2, 2, "loss", Elo(1500), Elo(1484)),
  };
  auto plan = PlanVoid(VoidPolicy::kCompensate, *elo, true, voided, {},
                       {{"a", Elo(1499)}, {"b", Elo(1484)}, {"c", Elo(1517)}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->players.size(), 2u);
  EXPECT_EQ(plan->players[0].player_id, "a");
  EXPECT_EQ(plan->players[0].before, Elo(1499));
  EXPECT_EQ(plan->players[0].after, Elo(1483));
  EXPECT_EQ(plan->players[0].displayed, 1483);
  EXPECT_EQ(std::make_tuple(plan->players[0].games, plan->players[0].wins, plan->players[0].losses,
                            plan->players[0].placements),
            std::make_tuple(1, 1, 0, int64_t{1}));
  EXPECT_EQ(plan->players[1].player_id, "b");
  EXPECT_EQ(plan->players[1].after, Elo(1500));
  EXPECT_EQ(std::make_tuple(plan->players[1].games, plan->players[1].wins, plan->players[1].losses,
                            plan->players[1].placements),
            std::make_tuple(1, 0, 1, int64_t{2}));
  EXPECT_TRUE(plan->revised.empty());
}

// Replaying without match 1, match 2 is c against a from 1500 each: c 1516, a 1484; b is back at
// 1500. Match 2's lines are revised from (1516 > 1499, 1500 > 1517).
TEST(VoidRatingsTest, ReplayRatesTheLaterMatchesAsIfTheVoidedOneWasNeverPlayed) {
  const auto elo = System("elo");
  const std::vector<HistorySeat> voided = {
      Seat(1, "a", 1, 1, "win", Elo(1500), Elo(1516)),
      Seat(1, "b", 2, 2, "loss", Elo(1500), Elo(1484)),
  };
  const std::vector<HistorySeat> later = {
      Seat(2, "c", 1, 1, "win", Elo(1500), Elo(1517)),
      Seat(2, "a", 2, 2, "loss", Elo(1516), Elo(1499)),
  };
  auto plan = PlanVoid(VoidPolicy::kReplay, *elo, true, voided, later,
                       {{"a", Elo(1499)}, {"b", Elo(1484)}, {"c", Elo(1517)}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->players.size(), 3u);
  EXPECT_EQ(plan->players[0].after, Elo(1484));  // a
  EXPECT_EQ(plan->players[1].after, Elo(1500));  // b
  EXPECT_EQ(plan->players[2].after, Elo(1516));  // c
  EXPECT_EQ(plan->players[2].games, 0);          // c keeps its counts
  ASSERT_EQ(plan->revised.size(), 2u);
  EXPECT_EQ(plan->revised[0].player_id, "a");
  EXPECT_EQ(plan->revised[0].old_before, Elo(1516));
  EXPECT_EQ(plan->revised[0].before, Elo(1500));
  EXPECT_EQ(plan->revised[0].after, Elo(1484));
  EXPECT_EQ(plan->revised[1].after, Elo(1516));
}

// An import after the voided match moved a outside the history: the replay's change to its last
// match lands on the imported rating (the compensation rule), not the replay's own end.
TEST(VoidRatingsTest, ARatingMovedOutsideTheHistoryKeepsThatMove) {
  const auto elo = System("elo");
  const std::vector<HistorySeat> voided = {
      Seat(1, "a", 1, 1, "win", Elo(1500), Elo(1516)),
      Seat(1, "b", 2, 2, "loss", Elo(1500), Elo(1484)),
  };
  auto plan =
      PlanVoid(VoidPolicy::kReplay, *elo, true, voided, {}, {{"a", Elo(1700)}, {"b", Elo(1484)}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->players[0].after, Elo(1684));
}

TEST(VoidRatingsTest, AVoidWithoutTheMatchsLinesIsRefused) {
  const auto elo = System("elo");
  EXPECT_FALSE(PlanVoid(VoidPolicy::kCompensate, *elo, true, {}, {}, {}).ok());
}

}  // namespace
}  // namespace verdict::lobby
