// A host's handle to a room outlives the room: the node's maintenance thread releases a
// finished room once it has lingered 30 s (on the node's clock), and the node itself may go.
// Every call through the handle then answers NOT_FOUND. Built into node_shutdown_test, with
// AddressSanitizer: the rooms used to be handed out as raw Room pointers, and a late reconnect
// through the one docs/embedding.md's example keeps was a heap use-after-free, which ASan reports.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "node/battle_node.h"
#include "node/room_table.h"
#include "tests/support/fake_lobby.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::node {
namespace {

using testing::WaitUntil;

class RoomHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NodeOptions o;
    o.node_id = "node-a";
    o.outbox_dir = dir_.path();
    o.lobby_urls = {testing::UnreachableUrl()};
    o.token = "token-a";
    o.clock = &clock_;
    auto node = BattleNode::Start(o);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(node).value();
  }

  // Room 42, players 421-430, finished by six votes for team 1 and stored.
  RoomHandle FinishedRoom() {
    auto room = node_->AddRoom(testing::MakeAllocation(42, "node-a", 421, 10));
    EXPECT_TRUE(room.ok()) << room.status().ToString();
    if (!room.ok()) return {};
    for (uint64_t p = 421; p <= 426; ++p) EXPECT_TRUE(room->Report(std::to_string(p), 1).ok());
    EXPECT_EQ(room->state().value(), RoomState::kFinished);
    EXPECT_TRUE(WaitUntil([&] { return node_->stored() == 1; }));
    return *room;
  }

  static void ExpectNotFound(RoomHandle& room) {
    EXPECT_FALSE(room.held());
    EXPECT_EQ(room.SetOnline(std::to_string(421), true).code(),
              StatusCode::kNotFound);  // the late reconnect
    EXPECT_EQ(room.Kick(std::to_string(422)).code(), StatusCode::kNotFound);
    EXPECT_EQ(room.RecordStats(std::to_string(423), 1, 2, 3, 4).code(), StatusCode::kNotFound);
    EXPECT_EQ(room.Report(std::to_string(424), 2).code(), StatusCode::kNotFound);
    EXPECT_EQ(room.Finish().code(), StatusCode::kNotFound);
    EXPECT_EQ(room.Abort("late").code(), StatusCode::kNotFound);
    EXPECT_EQ(room.state().status().code(), StatusCode::kNotFound);
    EXPECT_FALSE(room.result().has_value());
  }

  testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<BattleNode> node_;
};

TEST_F(RoomHandleTest, TheHandleOfARoomTheNodeReleasedAnswersNotFound) {
  RoomHandle room = FinishedRoom();
  // A late client while the room lingers: the room is there, and finished.
  EXPECT_EQ(room.SetOnline(std::to_string(427), false).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(room.result().has_value());
  EXPECT_EQ(room.result()->winner_team(), 1u);

  clock_.AdvanceMs(Room::kLingerMs);
  // The node's maintenance thread releases it within a second or so.
  ASSERT_TRUE(WaitUntil([&] { return !node_->FindRoom(42).held(); }));
  ExpectNotFound(room);
  RoomHandle found = node_->FindRoom(42);
  ExpectNotFound(found);
  RoomHandle none;
  EXPECT_EQ(none.Report(std::to_string(1), 1).code(), StatusCode::kNotFound);
}

// A call in progress on another thread keeps its room alive while the maintenance thread
// releases it: the call finishes on a whole room, and the next one answers NOT_FOUND.
TEST_F(RoomHandleTest, CallsRacingTheReleaseNeverTouchAFreedRoom) {
  RoomHandle room = FinishedRoom();
  std::atomic<bool> released{false};
  std::thread late_client([room, &released]() mutable {
    while (!released) {
      const Status s = room.SetOnline(std::to_string(430), false);
      if (s.code() == StatusCode::kNotFound) released = true;
      (void)room.result();
    }
  });
  clock_.AdvanceMs(Room::kLingerMs);
  EXPECT_TRUE(WaitUntil([&] { return released.load(); }));
  released = true;
  late_client.join();
}

TEST_F(RoomHandleTest, TheHandleOfARoomOfANodeThatIsGoneAnswersNotFound) {
  auto playing = node_->AddRoom(testing::MakeAllocation(43, "node-a", 431, 10));
  ASSERT_TRUE(playing.ok());
  RoomHandle room = *playing;
  ASSERT_EQ(node_->Shutdown(), 0u);
  node_.reset();
  EXPECT_FALSE(room.held());
  EXPECT_EQ(room.Report(std::to_string(431), 1).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace verdict::node
