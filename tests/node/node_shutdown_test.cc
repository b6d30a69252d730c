// Shutdown and drain at the edges: a full channel in front of a failing outbox must not hang
// shutdown, nor let a room be released while the thread that finished it still waits to hand
// its result over; "drained" must not be claimed while the writer holds a batch. Built with
// AddressSanitizer (with room_handle_test.cc), so a room freed under a thread still using it is
// caught as a use-after-free, not only by the release counts below.
#include <gtest/gtest.h>

#include <thread>

#include "node/battle_node.h"
#include "node/result_channel.h"
#include "node/room_table.h"
#include "tests/support/battle_node_peer.h"
#include "tests/support/failing_outbox.h"
#include "tests/support/fake_lobby.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

// Use-after-free is what this binary is for. Leak checking is off because it needs ptrace,
// which some CI containers forbid, and it would then fail even the build's test discovery.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace verdict::node {
namespace {

using namespace std::chrono_literals;
using testing::FailingOutbox;
using Peer = BattleNodeTestPeer;
using testing::MakeResult;
using testing::WaitUntil;

// A two-seat room (players room_id*10+1 on team 1 and room_id*10+2 on team 2).
v1::RoomAllocation Seats(uint64_t room_id) {
  return testing::MakeAllocation(room_id, "node-a", room_id * 10 + 1, 2);
}

class NodeShutdownTest : public ::testing::Test {
 protected:
  std::unique_ptr<BattleNode> Start(const std::string& lobby_url) {
    NodeOptions o;
    o.node_id = "node-a";
    o.outbox_dir = dir_.path();
    o.lobby_urls = {lobby_url};
    o.token = "token-a";
    o.channel_capacity = 4;
    o.clock = &clock_;
    o.writer.retry_interval = 10ms;
    o.writer.shutdown_deadline = 300ms;
    o.wrap_outbox = [this](std::unique_ptr<storage::Outbox> inner) {
      auto wrapped = std::make_unique<FailingOutbox>(std::move(inner));
      failing_ = wrapped.get();
      return std::unique_ptr<storage::Outbox>(std::move(wrapped));
    };
    auto node = BattleNode::Start(o);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    return node.ok() ? std::move(node).value() : nullptr;
  }

  testing::TempDir dir_;
  FakeClock clock_;
  FailingOutbox* failing_ = nullptr;
};

TEST_F(NodeShutdownTest,
       FullChannelAndFailingOutboxShutdownEndsCountsTheLostAndFreesNoWaitingRoom) {
  auto node = Start(testing::UnreachableUrl());
  ASSERT_NE(node, nullptr);
  failing_->set_fail_writes(true);
  // One result in the writer's hands, four filling the channel.
  ASSERT_TRUE(Peer::results(*node).Push(MakeResult(1)).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return failing_->failed_writes() >= 1 && Peer::results(*node).size() == 0; }));
  for (uint64_t room = 2; room <= 5; ++room)
    ASSERT_TRUE(Peer::results(*node).Push(MakeResult(room)).ok());

  // Room 100 finishes by the fallback on the node's maintenance thread; room 200 by majority
  // on a host thread. Both then wait on the full channel.
  auto by_fallback = node->AddRoom(Seats(100));
  auto by_majority = node->AddRoom(Seats(200));
  ASSERT_TRUE(by_fallback.ok() && by_majority.ok());
  ASSERT_TRUE(by_fallback->Report(std::to_string(1001), 1).ok());  // one vote of two: no majority
  clock_.AdvanceMs(Room::kFallbackMs);
  std::thread host([room = *by_majority]() mutable {
    room.Report(std::to_string(2001), 1).IgnoreError();
    room.Report(std::to_string(2002), 1).IgnoreError();  // majority: finishes, and waits in Push
  });
  ASSERT_TRUE(WaitUntil([&] { return Peer::results(*node).waiting_producers() == 2; }));

  // Long past the linger of a room that finished then: neither may go while its result waits.
  clock_.AdvanceMs(Room::kLingerMs + 1000);
  EXPECT_EQ(Peer::rooms(*node).ReleaseDue(), 0u) << "a room was freed while its result waited";

  // Ends (the test would hang otherwise) and counts every result it could not store: the
  // writer's one, the channel's four, and the two rooms refused when the channel closed.
  EXPECT_EQ(node->Shutdown(), 7u);
  host.join();

  // The rooms' linger starts only now that their hand-over is over.
  EXPECT_EQ(Peer::rooms(*node).ReleaseDue(), 0u);
  clock_.AdvanceMs(Room::kLingerMs);
  EXPECT_EQ(Peer::rooms(*node).ReleaseDue(), 2u);
}

// A batch taken from the channel but not yet written is neither in the channel nor in the
// outbox; "drained" must wait for it.
TEST_F(NodeShutdownTest, DrainedWaitsForTheBatchTheWriterHolds) {
  testing::FakeLobby lobby;
  auto node = Start(lobby.url());
  ASSERT_NE(node, nullptr);
  failing_->set_hold_writes(true);
  ASSERT_TRUE(Peer::results(*node).Push(MakeResult(7)).ok());
  ASSERT_TRUE(WaitUntil([&] { return failing_->held_writes() == 1; }));
  EXPECT_EQ(Peer::results(*node).size(), 0u);
  EXPECT_TRUE(node->Health().ok());
  EXPECT_FALSE(node->Drained()) << "drained while the writer holds a batch";

  failing_->set_hold_writes(false);
  ASSERT_TRUE(WaitUntil([&] { return node->Drained(); }));
  EXPECT_EQ(lobby.accepted().size(), 1u);
  EXPECT_EQ(node->Shutdown(), 0u);
}

}  // namespace
}  // namespace verdict::node
