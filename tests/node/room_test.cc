// The room's decision rules (DESIGN §4) and its one-time finish, on a simulated clock.
#include "node/room.h"

#include <gtest/gtest.h>

#include "tests/support/results.h"

namespace verdict::node {
namespace {

// Players 1..10; 1-5 on team 1, 6-10 on team 2.
v1::RoomAllocation TenSeats(uint64_t room_id = 77) {
  return testing::MakeAllocation(room_id, "node-a", 1, 10);
}

class RecordingNotifier : public BattleEndNotifier {
 public:
  void NotifyBattleEnd(const v1::BattleResult& r) override { rooms.push_back(r.room_id()); }
  std::vector<uint64_t> rooms;
};

class FailingReplays : public ReplayStore {
 public:
  Result<std::string> WriteReplay(const v1::BattleResult&) override {
    return UnavailableError("replay disk full");
  }
};

class WorkingReplays : public ReplayStore {
 public:
  Result<std::string> WriteReplay(const v1::BattleResult& r) override {
    return "replays/" + std::to_string(r.room_id());
  }
};

class RoomTest : public ::testing::Test {
 protected:
  std::unique_ptr<Room> MakeRoom(ReplayStore* replays = nullptr) {
    return std::make_unique<Room>(TenSeats(),
                                  RoomContext{"node-a", &clock_, &notifier_, replays, &channel_});
  }
  // Everything the room handed to the channel.
  std::vector<v1::BattleResult> Sent() {
    return channel_.PopBatch(100, std::chrono::milliseconds(0));
  }
  static void Vote(Room& room, std::initializer_list<uint64_t> players, uint32_t team) {
    for (uint64_t p : players) ASSERT_TRUE(room.Report(p, team).ok()) << "player " << p;
  }

  FakeClock clock_;
  RecordingNotifier notifier_;
  ResultChannel channel_{16};
};

TEST_F(RoomTest, StrictMajorityOfEligibleSeatsDecides) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3, 4, 5}, 1);  // exactly half of ten
  EXPECT_EQ(room->state(), Room::State::kPlaying) << "half is not a majority";
  Vote(*room, {6}, 1);
  ASSERT_EQ(room->state(), Room::State::kFinished);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::SETTLED);
  EXPECT_EQ(sent[0].winner_team(), 1u);
  EXPECT_FALSE(sent[0].suspect());
  EXPECT_EQ(sent[0].players_size(), 10);
  EXPECT_EQ(sent[0].node_id(), "node-a");
  EXPECT_EQ(sent[0].ended_at_ms(), clock_.NowMs());
  EXPECT_EQ(notifier_.rooms, std::vector<uint64_t>{77});
}

TEST_F(RoomTest, DrawIsTeamZero) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3, 6, 7, 8}, 0);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::SETTLED);
  EXPECT_EQ(sent[0].winner_team(), 0u);
}

TEST_F(RoomTest, OfflineAndKickedSeatsAreNotEligible) {
  auto room = MakeRoom();
  for (uint64_t p : {7, 8, 9, 10}) ASSERT_TRUE(room->SetOnline(p, false).ok());
  ASSERT_TRUE(room->Kick(6).ok());
  // Five eligible seats (1-5): three votes are a majority.
  Vote(*room, {1, 2}, 2);
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  EXPECT_EQ(room->Report(6, 1).code(), StatusCode::kFailedPrecondition) << "kicked cannot vote";
  ASSERT_TRUE(room->Report(9, 1).ok());  // offline: recorded, not counted
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  Vote(*room, {3}, 2);
  ASSERT_EQ(room->state(), Room::State::kFinished);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].winner_team(), 2u);
  for (const auto& p : sent[0].players()) {
    EXPECT_EQ(p.disconnected(), p.player_id() >= 6) << p.player_id();
  }
}

TEST_F(RoomTest, SeatsGoingOfflineCanDecideTheRoom) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3, 4, 5}, 1);
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  ASSERT_TRUE(room->SetOnline(10, false).ok());  // 5 of 9 eligible now
  EXPECT_EQ(room->state(), Room::State::kFinished);
}

TEST_F(RoomTest, FallbackAfterTenSecondsPicksThePluralityAsSuspect) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3, 4}, 1);
  Vote(*room, {6, 7}, 2);
  clock_.AdvanceMs(9'999);
  room->Tick();
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  clock_.AdvanceMs(1);
  room->Tick();
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::SETTLED);
  EXPECT_EQ(sent[0].winner_team(), 1u);
  EXPECT_TRUE(sent[0].suspect());
}

// The fallback and the linger are waits on the monotonic reading: a step of the wall clock
// neither brings them forward nor holds them back, and only the result's ended_at_ms (a
// timestamp) follows the wall clock.
TEST_F(RoomTest, FallbackAndLingerIgnoreStepsOfTheWallClock) {
  RoomTable table(&clock_);
  auto added = table.Add(MakeRoom());
  ASSERT_TRUE(added.ok());
  Room& room = **added;
  Vote(room, {1, 2, 3, 4}, 1);
  clock_.StepWallMs(3'600'000);  // an hour ahead
  room.Tick();
  EXPECT_EQ(room.state(), Room::State::kPlaying) << "a forward step brought the fallback on";
  clock_.StepWallMs(-7'200'000);  // an hour behind where it started
  clock_.AdvanceMs(10'000);
  room.Tick();
  ASSERT_EQ(room.state(), Room::State::kFinished) << "a backward step held the fallback back";
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].ended_at_ms(), clock_.NowMs());

  clock_.StepWallMs(3'600'000);
  EXPECT_EQ(table.ReleaseDue(), 0u) << "a forward step cut the linger short";
  EXPECT_EQ(table.oldest_finished_dwell_ms(), 0);
  clock_.StepWallMs(-7'200'000);
  clock_.AdvanceMs(30'000);
  EXPECT_EQ(table.ReleaseDue(), 1u) << "a backward step stretched the linger";
}

TEST_F(RoomTest, TieAtTheFallbackAbortsWithNoConsensus) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3}, 1);
  Vote(*room, {6, 7, 8}, 2);
  clock_.AdvanceMs(10'000);
  room->Tick();
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::ABORTED);
  EXPECT_EQ(sent[0].abort_reason(), "no_consensus");
  EXPECT_EQ(sent[0].winner_team(), 0u);
}

TEST_F(RoomTest, NoFallbackBeforeAnyReport) {
  auto room = MakeRoom();
  clock_.AdvanceMs(60'000);
  room->Tick();
  EXPECT_EQ(room->state(), Room::State::kPlaying);
}

TEST_F(RoomTest, FinishTwiceSendsOneResult) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3, 4, 5, 6}, 1);
  room->Finish();
  room->Finish();
  room->Abort("late");
  EXPECT_EQ(Sent().size(), 1u);
  EXPECT_EQ(notifier_.rooms.size(), 1u);
  EXPECT_EQ(room->Report(7, 2).code(), StatusCode::kFailedPrecondition);
}

TEST_F(RoomTest, ReplayFailureStillSendsTheResult) {
  FailingReplays replays;
  auto room = MakeRoom(&replays);
  room->Abort("host_abort");
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].replay_path(), "");
  EXPECT_EQ(sent[0].outcome(), v1::ABORTED);
  EXPECT_EQ(sent[0].abort_reason(), "host_abort");

  WorkingReplays working;
  auto other = std::make_unique<Room>(TenSeats(78),
                                      RoomContext{"node-a", &clock_, nullptr, &working, &channel_});
  other->Finish();
  EXPECT_EQ(Sent()[0].replay_path(), "replays/78");
}

TEST_F(RoomTest, BadReportsAreRefused) {
  auto room = MakeRoom();
  EXPECT_EQ(room->Report(1, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(room->Report(99, 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(room->SetOnline(99, false).code(), StatusCode::kNotFound);
}

TEST_F(RoomTest, FinishedRoomsLingerThirtySecondsThenAreReleased) {
  RoomTable table(&clock_);
  auto added = table.Add(MakeRoom());
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(table.Add(MakeRoom()).status().code(), StatusCode::kAlreadyExists);
  (*added)->Finish();
  clock_.AdvanceMs(29'999);
  EXPECT_EQ(table.ReleaseDue(), 0u);
  EXPECT_EQ(table.finished(), 1u);
  EXPECT_EQ(table.oldest_finished_dwell_ms(), 29'999);
  EXPECT_NE(table.Find(77), nullptr);
  clock_.AdvanceMs(1);
  EXPECT_EQ(table.ReleaseDue(), 1u);
  EXPECT_EQ(table.Find(77), nullptr);
}

}  // namespace
}  // namespace verdict::node
