// The simulator's kinds of battle as --simulate-modes gives them: what it reads, and the rooms it
// refuses to allocate because the lobby would refuse them.
#include <gtest/gtest.h>

#include "node/simulator.h"

namespace verdict::node {
namespace {

TEST(SimulatedModesTest, ReadsEachKindOfBattleInOrder) {
  auto modes = ParseSimulatedModes("ranked-5v5=2x5,ffa-8=8x1,royale-trios=20x3");
  ASSERT_TRUE(modes.ok()) << modes.status().ToString();
  ASSERT_EQ(modes->size(), 3u);
  EXPECT_EQ((*modes)[0].mode, "ranked-5v5");
  EXPECT_EQ((*modes)[0].teams, 2u);
  EXPECT_EQ((*modes)[0].team_size, 5u);
  EXPECT_EQ((*modes)[1].mode, "ffa-8");
  EXPECT_EQ((*modes)[1].teams, 8u);
  EXPECT_EQ((*modes)[1].team_size, 1u);
  EXPECT_EQ((*modes)[2].mode, "royale-trios");
  EXPECT_EQ((*modes)[2].teams, 20u);
  EXPECT_EQ((*modes)[2].team_size, 3u);
}

// Without --simulate-modes the simulator plays what it always played: 5v5s in no named mode.
TEST(SimulatedModesTest, DefaultIsFiveAgainstFiveInTheLobbysDefaultMode) {
  const SimulatorOptions options;
  ASSERT_EQ(options.modes.size(), 1u);
  EXPECT_EQ(options.modes[0].mode, "");
  EXPECT_EQ(options.modes[0].teams, 2u);
  EXPECT_EQ(options.modes[0].team_size, 5u);
}

TEST(SimulatedModesTest, RefusesWhatIsNotAKindOfBattleTheLobbyTakes) {
  for (const char* refused : {
           "",                   // nothing
           "ffa-8",              // no shape
           "=8x1",               // no mode
           "ffa-8=8",            // no team size
           "ffa-8=8x",           // no team size
           "ffa-8=x1",           // no teams
           "ffa-8=8x0",          // empty teams
           "ffa-8=8x1,",         // an empty item
           "ffa-8=8x1x2",        // not a number
           "ffa-8=-8x1",         // not a number
           "FFA=8x1",            // a mode name the lobby refuses
           "solo=1x5",           // one team
           "royale=101x1",       // more teams than a room may have
           "royale=70x3",        // more seats than a room may have
           "huge=4294967295x2",  // more seats than a room may have, and than 32 bits hold
       }) {
    auto modes = ParseSimulatedModes(refused);
    EXPECT_EQ(modes.status().code(), StatusCode::kInvalidArgument) << "'" << refused << "'";
  }
}

}  // namespace
}  // namespace verdict::node
