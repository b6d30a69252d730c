// The room's decision rules (docs/design.md §4) and its one-time finish, on a simulated clock; what
// it refuses to finish with; its table's linger.
#include <gtest/gtest.h>

#include <algorithm>

#include "node/result_channel.h"
#include "node/room_table.h"
#include "proto/validation.h"

#include "tests/support/results.h"

namespace verdict::node {
namespace {

// Players 1..10; 1-5 on team 1, 6-10 on team 2.
v1::RoomAllocation TenSeats(uint64_t room_id = 77) {
  return testing::MakeAllocation(room_id, "node-a", 1, 10);
}

// `teams` teams of `size` players: players 1, 2, … seated team by team (team 1 first).
v1::RoomAllocation TeamsOf(uint32_t teams, uint32_t size, uint64_t room_id = 80) {
  v1::RoomAllocation a;
  a.set_room_id(room_id);
  a.set_node_id("node-a");
  for (uint32_t i = 0; i < teams * size; ++i) {
    v1::Seat* seat = a.add_seats();
    seat->set_player_id(std::to_string(i + 1));
    seat->set_team(i / size + 1);
  }
  return a;
}

// The lobby's own check of what a node sends (one rule for every body format).
void ExpectTheLobbyTakes(const v1::BattleResult& result) {
  EXPECT_TRUE(wire::ValidateResult(result).ok()) << wire::ValidateResult(result).ToString();
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

class InvalidReplays : public ReplayStore {
 public:
  Result<std::string> WriteReplay(const v1::BattleResult&) override {
    return std::string("replays/\xc0\x80");  // an overlong NUL: not UTF-8
  }
};

class RoomTest : public ::testing::Test {
 protected:
  RoomContext Context(std::shared_ptr<ReplayStore> replays = nullptr) {
    return RoomContext{"node-a", &clock_, notifier_, std::move(replays), &channel_, nullptr};
  }
  std::shared_ptr<Room> MakeRoom(std::shared_ptr<ReplayStore> replays = nullptr) {
    return MakeRoomOf(TenSeats(), std::move(replays));
  }
  std::shared_ptr<Room> MakeRoomOf(const v1::RoomAllocation& allocation,
                                   std::shared_ptr<ReplayStore> replays = nullptr) {
    auto room = Room::Create(allocation, Context(std::move(replays)));
    EXPECT_TRUE(room.ok()) << room.status().ToString();
    return room.ok() ? *room : nullptr;
  }
  // Everything the room handed to the channel.
  std::vector<v1::BattleResult> Sent() {
    return channel_.PopBatch(100, std::chrono::milliseconds(0));
  }
  static void Vote(Room& room, std::initializer_list<uint64_t> players, uint32_t team) {
    for (uint64_t p : players)
      ASSERT_TRUE(room.Report(std::to_string(p), team).ok()) << "player " << p;
  }
  // Players first … last report `ranks`.
  static void Place(Room& room, uint64_t first, uint64_t last, const std::vector<uint32_t>& ranks) {
    for (uint64_t p = first; p <= last; ++p) {
      const Status reported = room.ReportPlacements(std::to_string(p), ranks);
      ASSERT_TRUE(reported.ok()) << "player " << p << ": " << reported.ToString();
    }
  }

  FakeClock clock_;
  std::shared_ptr<RecordingNotifier> notifier_ = std::make_shared<RecordingNotifier>();
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
  EXPECT_EQ(notifier_->rooms, std::vector<uint64_t>{77});
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
  for (uint64_t p : {7, 8, 9, 10}) ASSERT_TRUE(room->SetOnline(std::to_string(p), false).ok());
  ASSERT_TRUE(room->Kick(std::to_string(6)).ok());
  // Five eligible seats (1-5): three votes are a majority.
  Vote(*room, {1, 2}, 2);
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  EXPECT_EQ(room->Report(std::to_string(6), 1).code(), StatusCode::kFailedPrecondition)
      << "kicked cannot vote";
  ASSERT_TRUE(room->Report(std::to_string(9), 1).ok());  // offline: recorded, not counted
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  Vote(*room, {3}, 2);
  ASSERT_EQ(room->state(), Room::State::kFinished);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].winner_team(), 2u);
  for (const auto& p : sent[0].players()) {
    EXPECT_EQ(p.disconnected(), std::stoull(p.player_id()) >= 6) << p.player_id();
  }
}

TEST_F(RoomTest, SeatsGoingOfflineCanDecideTheRoom) {
  auto room = MakeRoom();
  Vote(*room, {1, 2, 3, 4, 5}, 1);
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  ASSERT_TRUE(room->SetOnline(std::to_string(10), false).ok());  // 5 of 9 eligible now
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
  auto room = table.Add(TenSeats(), Context());
  ASSERT_TRUE(room.ok()) << room.status().ToString();
  for (uint64_t p : {1, 2, 3, 4}) ASSERT_TRUE(room->Report(std::to_string(p), 1).ok());
  clock_.StepWallMs(3'600'000);  // an hour ahead
  table.TickAll();
  EXPECT_EQ(room->state().value(), RoomState::kPlaying) << "a forward step brought the fallback on";
  clock_.StepWallMs(-7'200'000);  // an hour behind where it started
  clock_.AdvanceMs(10'000);
  table.TickAll();
  ASSERT_EQ(room->state().value(), RoomState::kFinished)
      << "a backward step held the fallback back";
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
  EXPECT_TRUE(room->Finish().ok());
  EXPECT_TRUE(room->Finish().ok());
  EXPECT_TRUE(room->Abort("late").ok());
  EXPECT_EQ(Sent().size(), 1u);
  EXPECT_EQ(notifier_->rooms.size(), 1u);
  EXPECT_EQ(room->Report(std::to_string(7), 2).code(), StatusCode::kFailedPrecondition);
}

TEST_F(RoomTest, ReplayFailureStillSendsTheResult) {
  auto room = MakeRoom(std::make_shared<FailingReplays>());
  ASSERT_TRUE(room->Abort("host_abort").ok());
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].replay_path(), "");
  EXPECT_EQ(sent[0].outcome(), v1::ABORTED);
  EXPECT_EQ(sent[0].abort_reason(), "host_abort");

  auto other = Room::Create(TenSeats(78), Context(std::make_shared<WorkingReplays>()));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Finish().ok());
  EXPECT_EQ(Sent()[0].replay_path(), "replays/78");
}

// What the host hands the room is checked with the lobby's rules before the room finishes with
// it: an abort reason that is not UTF-8 used to be stored, then quarantined as "undecodable"
// (room 0), never delivered, and reported stored. It is refused, and the room plays on; a
// replay path that is not UTF-8 is dropped like a failed replay; statistics over the lobby's
// range are refused when recorded.
TEST_F(RoomTest, InputTheLobbyWouldRefuseIsRefusedBeforeTheRoomFinishes) {
  auto room = MakeRoom();
  const Status abort = room->Abort("crash \xff\xfe");
  EXPECT_EQ(abort.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(abort.message().find("abort_reason is not valid UTF-8"), std::string::npos)
      << abort.message();
  EXPECT_EQ(room->Abort(std::string(5000, 'x')).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  EXPECT_TRUE(Sent().empty());
  EXPECT_TRUE(notifier_->rooms.empty()) << "the clients were told of an end that did not happen";

  const Status stats = room->RecordStats(std::to_string(1), 1u << 31, 0, 0, 0);
  EXPECT_EQ(stats.code(), StatusCode::kInvalidArgument) << stats.ToString();
  ASSERT_TRUE(room->RecordStats(std::to_string(1), (1u << 31) - 1, 0, 0, 0).ok());

  ASSERT_TRUE(room->Abort("host_abort").ok());
  ASSERT_EQ(Sent().size(), 1u);

  auto bad_path = Room::Create(TenSeats(79), Context(std::make_shared<InvalidReplays>()));
  ASSERT_TRUE(bad_path.ok());
  ASSERT_TRUE((*bad_path)->Finish().ok());
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].replay_path(), "") << "a replay path the lobby cannot decode went out";
  EXPECT_EQ(sent[0].room_id(), 79u);
}

// A roster the lobby would refuse makes no room: a player twice used to be merged into one
// seat, an empty roster accepted, and a room 0 finished with a result stored nowhere.
TEST_F(RoomTest, ARosterTheLobbyWouldRefuseMakesNoRoom) {
  v1::RoomAllocation twice = TenSeats();
  twice.mutable_seats(6)->set_player_id("1");
  v1::RoomAllocation empty = TenSeats();
  empty.clear_seats();
  v1::RoomAllocation room_zero = TenSeats(0);
  v1::RoomAllocation other_node = testing::MakeAllocation(77, "node-b", 1, 10);
  for (const auto* allocation : {&twice, &empty, &room_zero, &other_node}) {
    auto room = Room::Create(*allocation, Context());
    EXPECT_EQ(room.status().code(), StatusCode::kInvalidArgument) << room.status().ToString();
  }
  RoomTable table(&clock_);
  EXPECT_EQ(table.Add(room_zero, Context()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(table.playing(), 0u);
}

TEST_F(RoomTest, BadReportsAreRefused) {
  auto room = MakeRoom();
  EXPECT_EQ(room->Report(std::to_string(1), 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(room->Report(std::to_string(99), 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(room->SetOnline(std::to_string(99), false).code(), StatusCode::kNotFound);
}

// Rooms of any shape vote on the whole placement: votes that agree on the winner but not on
// the places below it are different votes.
TEST_F(RoomTest, StrictMajorityOfEligibleSeatsDecidesTheWholePlacement) {
  auto room = MakeRoomOf(TeamsOf(3, 3));  // a 3v3v3: players 1-3, 4-6, 7-9
  Place(*room, 1, 4, {1, 2, 3});
  Place(*room, 5, 8, {1, 3, 2});
  EXPECT_EQ(room->state(), Room::State::kPlaying)
      << "eight of nine agree team 1 won, but no placement has five votes";
  Place(*room, 8, 8, {1, 2, 3});  // player 8 changes its vote: five of nine
  ASSERT_EQ(room->state(), Room::State::kFinished);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::SETTLED);
  EXPECT_FALSE(sent[0].suspect());
  EXPECT_FALSE(sent[0].has_winner_team()) << "a room of three teams is placed by placements";
  EXPECT_EQ(sent[0].winner_team(), 0u);
  ASSERT_EQ(sent[0].placements_size(), 3);
  for (uint32_t t = 1; t <= 3; ++t) {
    EXPECT_EQ(sent[0].placements(t - 1).team(), t);
    EXPECT_EQ(sent[0].placements(t - 1).rank(), t);
  }
  EXPECT_EQ(sent[0].players_size(), 9);
  ExpectTheLobbyTakes(sent[0]);
}

TEST_F(RoomTest, OfflineSeatsAreNotEligibleInARoomOfManyTeams) {
  auto room = MakeRoomOf(TeamsOf(3, 3));
  for (uint64_t p : {7, 8, 9}) ASSERT_TRUE(room->SetOnline(std::to_string(p), false).ok());
  Place(*room, 1, 3, {2, 1, 3});  // three of six eligible: half is not a majority
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  ASSERT_TRUE(room->Kick(std::to_string(6)).ok());  // three of five
  ASSERT_EQ(room->state(), Room::State::kFinished);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(wire::RanksOf(sent[0]), (std::vector<uint32_t>{2, 1, 3}));
  ExpectTheLobbyTakes(sent[0]);
}

TEST_F(RoomTest, FreeForAllOfEightSoloPlayersSettlesWithEveryPlace) {
  auto room = MakeRoomOf(TeamsOf(8, 1));
  const std::vector<uint32_t> placed = {3, 1, 5, 2, 8, 5, 7, 4};  // players 3 and 6 tie for 5th
  Place(*room, 1, 4, placed);
  Place(*room, 5, 5, {1, 3, 5, 2, 8, 5, 7, 4});
  EXPECT_EQ(room->state(), Room::State::kPlaying) << "four of eight is not a majority";
  Place(*room, 6, 6, placed);
  ASSERT_EQ(room->state(), Room::State::kFinished);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::SETTLED);
  EXPECT_FALSE(sent[0].has_winner_team());
  ASSERT_EQ(sent[0].placements_size(), 8);
  EXPECT_EQ(wire::RanksOf(sent[0]), placed);
  for (const auto& p : sent[0].players()) EXPECT_EQ(std::to_string(p.team()), p.player_id());
  ExpectTheLobbyTakes(sent[0]);
}

TEST_F(RoomTest, BattleRoyaleOfTwentyTriosIsPlacedOneToTwenty) {
  auto room = MakeRoomOf(TeamsOf(20, 3));
  std::vector<uint32_t> placed(20);
  for (uint32_t t = 0; t < 20; ++t) placed[t] = 20 - t;  // the last squad seated won
  Place(*room, 1, 30, placed);
  EXPECT_EQ(room->state(), Room::State::kPlaying) << "30 of 60 is not a majority";
  Place(*room, 31, 31, placed);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(wire::RanksOf(sent[0]), placed);
  EXPECT_EQ(sent[0].players_size(), 60);
  ExpectTheLobbyTakes(sent[0]);
}

TEST_F(RoomTest, FallbackPicksThePluralityPlacementAsSuspect) {
  auto room = MakeRoomOf(TeamsOf(3, 3));
  Place(*room, 1, 3, {3, 2, 1});
  Place(*room, 4, 5, {1, 2, 3});
  Place(*room, 6, 7, {3, 1, 2});
  clock_.AdvanceMs(9'999);
  room->Tick();
  EXPECT_EQ(room->state(), Room::State::kPlaying);
  clock_.AdvanceMs(1);
  room->Tick();
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::SETTLED);
  EXPECT_TRUE(sent[0].suspect());
  EXPECT_EQ(wire::RanksOf(sent[0]), (std::vector<uint32_t>{3, 2, 1}));
  ExpectTheLobbyTakes(sent[0]);
}

TEST_F(RoomTest, TieOfPlacementsAtTheFallbackAbortsWithNoConsensus) {
  auto room = MakeRoomOf(TeamsOf(3, 3));
  Place(*room, 1, 3, {1, 2, 3});
  Place(*room, 4, 6, {1, 3, 2});  // the same winner, another placement: a tie
  Place(*room, 7, 7, {2, 1, 3});
  clock_.AdvanceMs(10'000);
  room->Tick();
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].outcome(), v1::ABORTED);
  EXPECT_EQ(sent[0].abort_reason(), "no_consensus");
  EXPECT_EQ(sent[0].placements_size(), 0);
  EXPECT_EQ(sent[0].winner_team(), 0u);
  ExpectTheLobbyTakes(sent[0]);
}

// A placement is checked as the lobby will check the result (wire::ValidateResult): one rank for
// each team of the room, each between 1 and the number of teams. Since a report gives team t's
// rank at index t - 1, a team cannot be ranked twice; it can be left out, or a team the room
// does not have can be ranked. A refused report changes no vote and starts no fallback.
TEST_F(RoomTest, APlacementTheLobbyWouldRefuseIsRefusedAndChangesNoVote) {
  auto room = MakeRoomOf(TeamsOf(3, 3));
  Place(*room, 1, 1, {1, 2, 3});
  const std::vector<std::vector<uint32_t>> refused = {
      {1, 2},        // team 3 missing
      {1, 2, 3, 4},  // a team 4 the room does not have
      {0, 1, 2},     // rank 0
      {1, 2, 4},     // rank beyond the number of teams
      {},            // nothing
  };
  for (const auto& ranks : refused) {
    const Status report = room->ReportPlacements(std::to_string(1), ranks);
    EXPECT_EQ(report.code(), StatusCode::kInvalidArgument) << report.ToString();
    EXPECT_NE(report.message().find("placements"), std::string::npos) << report.message();
  }
  const Status shorthand = room->Report(std::to_string(1), 1);
  EXPECT_EQ(shorthand.code(), StatusCode::kInvalidArgument)
      << "winner_team is for two teams: " << shorthand.ToString();
  Place(*room, 2, 5, {1, 2, 3});
  EXPECT_EQ(room->state(), Room::State::kFinished) << "player 1's vote was lost to a refusal";
  ASSERT_EQ(Sent().size(), 1u);

  auto quiet = MakeRoomOf(TeamsOf(3, 3, 81));
  EXPECT_EQ(quiet->ReportPlacements(std::to_string(1), {1, 1}).code(),
            StatusCode::kInvalidArgument);
  clock_.AdvanceMs(60'000);
  quiet->Tick();
  EXPECT_EQ(quiet->state(), Room::State::kPlaying) << "a refused report started the fallback";

  auto two = MakeRoom();
  EXPECT_EQ(two->ReportPlacements(std::to_string(1), {1, 3}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(two->ReportPlacements(std::to_string(1), {1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(two->ReportPlacements(std::to_string(1), {}).code(), StatusCode::kInvalidArgument)
      << "no placement at all is not a draw";
  EXPECT_EQ(two->Report(std::to_string(1), 3).code(), StatusCode::kInvalidArgument);
  // Both teams second: rated by their order but counted a loss for everyone (issue 49, item 2).
  const Status nobody_first = two->ReportPlacements(std::to_string(1), {2, 2});
  EXPECT_EQ(nobody_first.code(), StatusCode::kInvalidArgument) << nobody_first.ToString();
  EXPECT_NE(nobody_first.message().find("rank 1"), std::string::npos) << nobody_first.message();
  EXPECT_TRUE(Sent().empty());
}

// A two-team client written before placements works unchanged: Report(winner_team) and the
// placement it means are one vote and one result, and that result is, byte for byte, the one
// the room built before placements: winner_team set (0 too), no placements.
TEST_F(RoomTest, TwoTeamReportIsByteForByteThePlacementItMeans) {
  const std::vector<std::pair<uint32_t, std::vector<uint32_t>>> meanings = {
      {1, {1, 2}}, {2, {2, 1}}, {0, {1, 1}}};
  for (const auto& [winner_team, ranks] : meanings) {
    SCOPED_TRACE("winner_team " + std::to_string(winner_team));
    auto by_team = MakeRoom();
    ASSERT_TRUE(by_team->RecordStats(std::to_string(2), 7, 1, 3, 1200).ok());
    ASSERT_TRUE(by_team->SetOnline(std::to_string(9), false).ok());
    Vote(*by_team, {1, 2, 3, 4, 5}, winner_team);  // five of nine
    auto by_placement = MakeRoom();
    ASSERT_TRUE(by_placement->RecordStats(std::to_string(2), 7, 1, 3, 1200).ok());
    ASSERT_TRUE(by_placement->SetOnline(std::to_string(9), false).ok());
    Place(*by_placement, 1, 3, ranks);
    Vote(*by_placement, {4, 5}, winner_team);  // the same vote as the placement's: five of nine
    const auto sent = Sent();
    ASSERT_EQ(sent.size(), 2u);

    // The result as the room built it before placements.
    v1::BattleResult before;
    before.set_room_id(77);
    before.set_node_id("node-a");
    before.set_ended_at_ms(clock_.NowMs());
    before.set_outcome(v1::SETTLED);
    before.set_winner_team(winner_team);
    const v1::RoomAllocation seated = TenSeats();
    for (const auto& seat : seated.seats()) {
      v1::PlayerResult* p = before.add_players();
      p->set_player_id(seat.player_id());
      p->set_team(seat.team());
      p->set_disconnected(seat.player_id() == "9");
      if (seat.player_id() == "2") {
        p->set_kills(7);
        p->set_deaths(1);
        p->set_assists(3);
        p->set_score(1200);
      }
    }
    std::sort(before.mutable_players()->begin(), before.mutable_players()->end(),
              [](const auto& a, const auto& b) { return a.player_id() < b.player_id(); });
    for (const auto& result : sent) {
      EXPECT_TRUE(result.has_winner_team());
      EXPECT_EQ(result.placements_size(), 0);
      EXPECT_EQ(result.SerializeAsString(), before.SerializeAsString())
          << result.DebugString() << "\nbefore placements:\n"
          << before.DebugString();
      ExpectTheLobbyTakes(result);
    }
  }

  // Every placement of two teams a vote can give ((1, 2), (2, 1), (1, 1): some team is first) is
  // one winner_team says; both teams second is refused as a vote (issue 49, item 2).
  EXPECT_EQ(MakeRoom()->ReportPlacements("1", {2, 2}).code(), StatusCode::kInvalidArgument);
}

TEST_F(RoomTest, FinishedRoomsLingerThirtySecondsThenAreReleased) {
  RoomTable table(&clock_);
  auto added = table.Add(TenSeats(), Context());
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(table.Add(TenSeats(), Context()).status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(added->Finish().ok());
  clock_.AdvanceMs(29'999);
  EXPECT_EQ(table.ReleaseDue(), 0u);
  EXPECT_EQ(table.finished(), 1u);
  EXPECT_EQ(table.oldest_finished_dwell_ms(), 29'999);
  EXPECT_TRUE(table.Find(77).held());
  clock_.AdvanceMs(1);
  EXPECT_EQ(table.ReleaseDue(), 1u);
  EXPECT_FALSE(table.Find(77).held());
  EXPECT_FALSE(added->held());
  EXPECT_EQ(added->Report(std::to_string(1), 1).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace verdict::node
