// The node's plumbing: backpressure when the outbox cannot write (P6), shutdown storing what
// is queued, a restarted node delivering what the previous one stored, the derived gauges on a
// simulated clock, /healthz, verdict-node reloading its token on SIGHUP, and on_replicated.
#include "node/battle_node.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "proto/wire.h"
#include "tests/support/battle_node_peer.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/failing_outbox.h"
#include "tests/support/fake_lobby.h"
#include "tests/support/http_client.h"
#include "tests/support/outbox_images.h"
#include "tests/support/process.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::node {
namespace {

using namespace std::chrono_literals;
using testing::FailingOutbox;
using Peer = BattleNodeTestPeer;

// A two-seat room whose players nobody else uses.
v1::RoomAllocation Seats(uint64_t room_id) {
  return testing::MakeAllocation(room_id, "node-a", room_id * 10 + 1, 2);
}

using testing::WaitUntil;

// Adds room `room_id` (Seats) to `node` and aborts it: the result goes to the channel, the call
// waiting while the channel is full.
void AbortRoom(BattleNode& node, uint64_t room_id) {
  auto room = node.AddRoom(Seats(room_id));
  ASSERT_TRUE(room.ok()) << room.status().ToString();
  EXPECT_TRUE(room->Abort("test").ok()) << "room " << room_id;
}

class BattleNodeTest : public ::testing::Test {
 protected:
  NodeOptions Options(const std::string& lobby_url) {
    NodeOptions o;
    o.node_id = "node-a";
    o.outbox_dir = dir_.path();
    o.lobby_urls = {lobby_url};
    o.token = "token-a";
    o.channel_capacity = 4;
    o.writer.retry_interval = 20ms;
    return o;
  }
  // A node whose outbox writes can be switched off; `failing_` points into it.
  std::unique_ptr<BattleNode> StartWithFailingOutbox(const std::string& lobby_url,
                                                     bool unsafe_drop = false) {
    NodeOptions o = Options(lobby_url);
    o.writer.unsafe_drop_failed_batches_for_test = unsafe_drop;
    o.wrap_outbox = [this](std::unique_ptr<storage::Outbox> inner) {
      auto wrapped = std::make_unique<FailingOutbox>(std::move(inner));
      failing_ = wrapped.get();
      return std::unique_ptr<storage::Outbox>(std::move(wrapped));
    };
    auto node = BattleNode::Start(o);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    return node.ok() ? std::move(node).value() : nullptr;
  }
  std::set<uint64_t> StoredRooms(storage::Outbox& outbox) {
    std::set<uint64_t> rooms;
    for (uint32_t s = 0; s < outbox.shard_count(); ++s) {
      for (const auto& r : *outbox.ReadShard(s, 0, 1000)) {
        EXPECT_TRUE(rooms.insert(r.result.room_id()).second) << "stored twice";
      }
    }
    return rooms;
  }

  testing::TempDir dir_;
  testing::FakeLobby lobby_;
  FailingOutbox* failing_ = nullptr;
};

// N / (C − R), checked against values worked out by hand.
TEST(BacklogDrainEtaTest, IsTheBacklogOverTheNetOutflow) {
  EXPECT_DOUBLE_EQ(BacklogDrainEtaS(1000, 20, 70), 20.0);  // 1000 / (70 − 20)
  EXPECT_DOUBLE_EQ(BacklogDrainEtaS(300, 0, 40), 7.5);     // 300 / 40
  EXPECT_DOUBLE_EQ(BacklogDrainEtaS(1, 99.5, 100), 2.0);   // 1 / 0.5
  // An empty backlog has drained, whatever the rates.
  EXPECT_EQ(BacklogDrainEtaS(0, 0, 0), 0.0);
  EXPECT_EQ(BacklogDrainEtaS(0, 50, 10), 0.0);
  // Going out no faster than coming in, a backlog never drains.
  EXPECT_EQ(BacklogDrainEtaS(10, 50, 50), std::numeric_limits<double>::infinity());
  EXPECT_EQ(BacklogDrainEtaS(10, 50, 10), std::numeric_limits<double>::infinity());
  EXPECT_EQ(BacklogDrainEtaS(10, 0, 0), std::numeric_limits<double>::infinity());
}

TEST_F(BattleNodeTest, FailingOutboxFillsTheChannelAndFinishWaitsThenNothingIsLost) {
  auto node = StartWithFailingOutbox(testing::UnreachableUrl());
  ASSERT_NE(node, nullptr);
  failing_->set_fail_writes(true);
  constexpr int kRooms = 12;  // far more than the channel (4) plus one batch in the writer
  std::atomic<int> finished{0};
  std::thread host([&] {
    for (uint64_t room = 1; room <= kRooms; ++room) {
      AbortRoom(*node, room);  // pushes the result; waits while the channel is full
      ++finished;
    }
  });
  // Steady once the writer holds a failed batch: the channel full, the next room waiting. (A
  // room may also block for a moment before the writer first takes from the channel.)
  ASSERT_TRUE(WaitUntil([&] {
    return failing_->failed_writes() > 0 && Peer::results(*node).waiting_producers() == 1 &&
           Peer::results(*node).size() == Peer::results(*node).capacity();
  })) << "finish() did not block on a full channel";
  EXPECT_LT(finished.load(), kRooms);
  EXPECT_TRUE(WaitUntil([&] { return failing_->failed_writes() > 2; }))
      << "the writer should keep retrying";
  EXPECT_EQ(node->Health().code(), StatusCode::kUnavailable);

  failing_->set_fail_writes(false);
  host.join();
  ASSERT_TRUE(WaitUntil([&] { return node->stored() == kRooms; }));
  EXPECT_TRUE(node->Health().ok());
  std::set<uint64_t> expected;
  for (uint64_t room = 1; room <= kRooms; ++room) expected.insert(room);
  EXPECT_EQ(StoredRooms(Peer::outbox(*node)), expected);
}

// Group commit reports a result stored only after the fsync that covers it: while syncs fail,
// nothing is reported stored however many results were written, and the channel fills (P6).
TEST_F(BattleNodeTest, NothingIsReportedStoredBeforeItsSyncSucceeds) {
  auto node = StartWithFailingOutbox(testing::UnreachableUrl());
  ASSERT_NE(node, nullptr);
  failing_->set_fail_syncs(true);
  // More than the writer path can hold while no sync succeeds: the channel (4), the batch in
  // the writer's hand, the 4 batches waiting for the sync thread and the 4 it is retrying, each
  // batch at most the channel's 4 results: 40.
  constexpr int kRooms = 48;
  std::thread host([&] {
    for (uint64_t room = 1; room <= kRooms; ++room) {
      AbortRoom(*node, room);
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return Peer::results(*node).waiting_producers() == 1; }))
      << "finish() did not block while nothing could be made durable";
  EXPECT_TRUE(WaitUntil([&] { return failing_->failed_syncs() > 2; }));
  EXPECT_EQ(node->stored(), 0u) << "results reported stored before any fsync succeeded";
  EXPECT_EQ(node->Health().code(), StatusCode::kUnavailable);

  failing_->set_fail_syncs(false);
  host.join();
  ASSERT_TRUE(WaitUntil([&] { return node->stored() == kRooms; }));
  EXPECT_EQ(StoredRooms(Peer::outbox(*node)).size(), static_cast<size_t>(kRooms));
}

// Negative control: a writer that drops the batch it could not write loses results, and the
// same count of stored rooms shows it.
TEST_F(BattleNodeTest, NegativeControlDroppingFailedBatchesIsCaught) {
  auto node = StartWithFailingOutbox(testing::UnreachableUrl(), /*unsafe_drop=*/true);
  ASSERT_NE(node, nullptr);
  failing_->set_fail_writes(true);
  for (uint64_t room = 1; room <= 12; ++room) {
    AbortRoom(*node, room);
  }
  ASSERT_TRUE(WaitUntil([&] { return Peer::results(*node).size() == 0; }));
  failing_->set_fail_writes(false);
  EXPECT_LT(StoredRooms(Peer::outbox(*node)).size(), 12u) << "lost results went unnoticed";
}

// The embedding API's second state after "stored": on_replicated names each finished room once
// its copy is in etcd, while the lobby is away (replication does not wait for a receipt).
TEST_F(BattleNodeTest, OnReplicatedNamesEachFinishedRoomOnceItsCopyIsInEtcd) {
  VERDICT_NEED_ETCD();
  testing::TempDir etcd_dir;
  auto etcd = testing::EtcdCluster::Start(etcd_dir.path(), 1);
  ASSERT_NE(etcd, nullptr);
  NodeOptions o = Options(testing::UnreachableUrl());
  ASSERT_TRUE(replication::ParseEtcdUrl(etcd->url(), &o.replication.etcd).ok());
  std::mutex mu;
  std::multiset<uint64_t> replicated;
  o.on_replicated = [&](const std::vector<replication::ReplicatedResult>& results) {
    std::lock_guard lock(mu);
    for (const auto& r : results) {
      EXPECT_TRUE(r.status.ok()) << r.room_id << ": " << r.status.ToString();
      replicated.insert(r.room_id);
    }
  };
  auto node = BattleNode::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  for (uint64_t room = 1; room <= 3; ++room) AbortRoom(**node, room);
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::lock_guard lock(mu);
        return replicated.size() >= 3;
      },
      20s));
  EXPECT_EQ((*node)->Shutdown(), 0u);
  std::lock_guard lock(mu);
  EXPECT_EQ(replicated, (std::multiset<uint64_t>{1, 2, 3}));
}

TEST_F(BattleNodeTest, ShutdownStoresWhatTheChannelHolds) {
  auto node = StartWithFailingOutbox(testing::UnreachableUrl());
  ASSERT_NE(node, nullptr);
  failing_->set_fail_writes(true);
  for (uint64_t room = 1; room <= 3; ++room) {
    AbortRoom(*node, room);
  }
  std::thread recover([&] {
    std::this_thread::sleep_for(200ms);
    failing_->set_fail_writes(false);
  });
  EXPECT_EQ(node->Shutdown(), 0u);
  recover.join();
  EXPECT_EQ(node->stored(), 3u);
  node.reset();
  auto reopened = storage::OpenOutbox(dir_.path(), {});
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(StoredRooms(**reopened), (std::set<uint64_t>{1, 2, 3}));
}

TEST_F(BattleNodeTest, FinishAfterShutdownIsRefusedNotSilentlyDropped) {
  auto node = BattleNode::Start(Options(testing::UnreachableUrl()));
  ASSERT_TRUE(node.ok());
  (*node)->Shutdown();
  EXPECT_EQ(Peer::results(**node).Push(v1::BattleResult()).code(), StatusCode::kFailedPrecondition);
}

// After Shutdown nothing a room finishes can be stored: Report, Finish and Abort used to answer
// OK for a result that was dropped (with only an error line). The call that would finish the
// room answers FAILED_PRECONDITION, the room plays on (nobody was told the battle ended), and
// nothing counts as stored; in either finishing mode.
TEST_F(BattleNodeTest, AfterShutdownTheCallThatWouldFinishARoomIsRefusedAndTheRoomPlaysOn) {
  auto node = BattleNode::Start(Options(testing::UnreachableUrl()));
  ASSERT_TRUE(node.ok());
  for (Finishing finishing : {Finishing::kOnCallingThread, Finishing::kHandedOff}) {
    const uint64_t id = finishing == Finishing::kHandedOff ? 51 : 50;
    RoomOptions options;
    options.finishing = finishing;
    auto room = (*node)->AddRoom(testing::MakeAllocation(id, "node-a", id * 10 + 1, 10), options);
    ASSERT_TRUE(room.ok()) << room.status().ToString();
    for (uint64_t p = id * 10 + 1; p <= id * 10 + 5; ++p)
      ASSERT_TRUE(room->Report(std::to_string(p), 1).ok());
  }
  ASSERT_EQ((*node)->Shutdown(), 0u);
  for (uint64_t id : {50, 51}) {
    SCOPED_TRACE(id);
    RoomHandle room = (*node)->FindRoom(id);
    const Status deciding = room.Report(std::to_string(id * 10 + 6), 1);  // the sixth of ten votes
    EXPECT_EQ(deciding.code(), StatusCode::kFailedPrecondition) << deciding.ToString();
    EXPECT_NE(deciding.message().find("shutting down"), std::string::npos) << deciding.message();
    EXPECT_EQ(room.Finish().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(room.Abort("host_abort").code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(room.state().value(), RoomState::kPlaying);
    EXPECT_FALSE(room.result().has_value());
  }
  EXPECT_EQ((*node)->stored(), 0u);
}

// The library took what the lobby never would, reported it stored, and lost it later: a room 0
// (stored nowhere, yet Add and Report said OK), a roster with a player twice (silently merged),
// an empty one, unequal teams, another node's room, a node id that is not UTF-8. AddRoom refuses
// each with the lobby's own rules, and nothing reaches the outbox.
TEST_F(BattleNodeTest, AddRoomRefusesAnAllocationTheLobbyWouldNot) {
  auto node = BattleNode::Start(Options(testing::UnreachableUrl()));
  ASSERT_TRUE(node.ok());
  const v1::RoomAllocation good = testing::MakeAllocation(60, "node-a", 601, 10);
  std::vector<std::pair<std::string, v1::RoomAllocation>> bad;
  bad.emplace_back("room_id must be a positive integer", good);
  bad.back().second.set_room_id(0);
  bad.emplace_back("has two seats", good);
  bad.back().second.mutable_seats(9)->set_player_id("601");
  bad.emplace_back("between 2 and 200 seats", good);
  bad.back().second.clear_seats();
  bad.emplace_back("team 3 is empty", good);
  bad.back().second.mutable_seats(9)->set_team(4);
  bad.emplace_back("allocated to node 'node-b'", good);
  bad.back().second.set_node_id("node-b");
  bad.emplace_back("node_id is not valid UTF-8", good);
  bad.back().second.set_node_id("node-\xff");
  for (const auto& [why, allocation] : bad) {
    SCOPED_TRACE(why);
    auto room = (*node)->AddRoom(allocation);
    ASSERT_FALSE(room.ok()) << "accepted";
    EXPECT_EQ(room.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(room.status().message().find(why), std::string::npos) << room.status().message();
  }
  auto room = (*node)->AddRoom(good);
  ASSERT_TRUE(room.ok()) << room.status().ToString();
  EXPECT_EQ((*node)->AddRoom(good).status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(room->Abort("host_abort").ok());
  ASSERT_TRUE(WaitUntil([&] { return (*node)->stored() == 1; }));
  (*node)->Shutdown();
  EXPECT_EQ(StoredRooms(Peer::outbox(**node)), (std::set<uint64_t>{60}));
}

// A node id or a token the lobby could never take is refused at Start, before the outbox is
// created: a node id that is not UTF-8 made every result stored, then quarantined as
// "undecodable" with room 0; a token with a stray newline made every request malformed.
TEST_F(BattleNodeTest, StartRefusesANodeIdOrATokenTheLobbyCouldNeverTake) {
  struct Case {
    std::string why;
    std::function<void(NodeOptions&)> spoil;
  };
  const std::vector<Case> cases = {
      {"node_id is not valid UTF-8", [](NodeOptions& o) { o.node_id = "node-\xc3"; }},
      {"node_id contains a NUL byte", [](NodeOptions& o) { o.node_id = std::string("a\0b", 3); }},
      {"node_id is required", [](NodeOptions& o) { o.node_id.clear(); }},
      {"lobby token holds a byte that cannot go in an HTTP header (0x0a at offset 7",
       [](NodeOptions& o) { o.token = "token-a\n"; }},
      {"lobby token is empty", [](NodeOptions& o) { o.token.clear(); }},
      {"ingest token holds a byte", [](NodeOptions& o) { o.ingest.token = "two words"; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    NodeOptions o = Options(lobby_.url());
    o.outbox_dir = dir_.Sub("outbox");
    c.spoil(o);
    auto node = BattleNode::Start(o);
    ASSERT_FALSE(node.ok()) << "started";
    EXPECT_EQ(node.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(node.status().message().find(c.why), std::string::npos) << node.status().message();
    EXPECT_FALSE(std::filesystem::exists(o.outbox_dir)) << "an outbox was created";
  }
}

// The same for verdict-node: `run --node-id` with bytes that are not UTF-8 is a clear error at
// start (it used to run, storing results the lobby could never decode).
TEST_F(BattleNodeTest, RunWithANodeIdThatIsNotUtf8FailsAtStart) {
  const testing::ExitAndOutput run =
      testing::RunToExit({testing::NodeBinary(), "run", "--node-id", "node-\xff", "--outbox",
                          dir_.Sub("outbox"), "--lobby", lobby_.url(), "--token", "token-a"});
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.output.find("node_id is not valid UTF-8"), std::string::npos) << run.output;
}

// Finishing::kHandedOff, for hosts on an event loop: the call that finishes a room returns at
// once, even while the outbox cannot write and the channel is full, and the results wait in the
// node until it can; none is lost, and Drained says they are still on their way.
TEST_F(BattleNodeTest, HandedOffFinishesReturnAtOnceWhileTheChannelIsFullAndAreAllStored) {
  auto node = StartWithFailingOutbox(testing::UnreachableUrl());
  ASSERT_NE(node, nullptr);
  failing_->set_fail_writes(true);
  constexpr uint64_t kRooms = 12;  // far more than the channel (4) and the writer's batch hold
  for (uint64_t id = 1; id <= kRooms; ++id) {
    RoomOptions handed_off;
    handed_off.finishing = Finishing::kHandedOff;
    auto room = node->AddRoom(Seats(id), handed_off);
    ASSERT_TRUE(room.ok());
    ASSERT_TRUE(room->Abort("test").ok());  // would block here, on this thread, if not handed off
    EXPECT_EQ(room->state().value(), RoomState::kFinished);
  }
  ASSERT_TRUE(WaitUntil([&] {
    return failing_->failed_writes() > 0 && Peer::results(*node).waiting_producers() == 1 &&
           Peer::results(*node).size() == Peer::results(*node).capacity();
  })) << "the finishing thread is not the one waiting on the full channel";
  EXPECT_FALSE(node->Drained());
  EXPECT_EQ(node->stored(), 0u);

  failing_->set_fail_writes(false);
  ASSERT_TRUE(WaitUntil([&] { return node->stored() == kRooms; }));
  std::set<uint64_t> expected;
  for (uint64_t id = 1; id <= kRooms; ++id) expected.insert(id);
  EXPECT_EQ(StoredRooms(Peer::outbox(*node)), expected);
  EXPECT_EQ(node->Shutdown(), 0u);
}

TEST_F(BattleNodeTest, RestartedNodeDeliversWhatThePreviousOneStored) {
  {
    auto node = BattleNode::Start(Options(testing::UnreachableUrl()));
    ASSERT_TRUE(node.ok());
    for (uint64_t room = 1; room <= 5; ++room) {
      AbortRoom(**node, room);
    }
    ASSERT_EQ((*node)->Shutdown(), 0u);
  }
  auto node = BattleNode::Start(Options(lobby_.url()));
  ASSERT_TRUE(node.ok());
  ASSERT_TRUE(lobby_.WaitForAccepted(5, 10s));
  ASSERT_TRUE(WaitUntil([&] { return (*node)->Drained(); }));
  std::set<uint64_t> delivered;
  for (const auto& r : lobby_.accepted()) delivered.insert(r.room_id());
  EXPECT_EQ(delivered, (std::set<uint64_t>{1, 2, 3, 4, 5}));
}

TEST_F(BattleNodeTest, MetricsEndpointServesOutboxAndDerivedGauges) {
  NodeOptions o = Options(lobby_.url());
  o.metrics_listen = "127.0.0.1:0";
  auto node = BattleNode::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_GT((*node)->metrics_port(), 0);
  const auto scraped = testing::HttpCall((*node)->metrics_port(), "GET", "/metrics");
  ASSERT_EQ(scraped.status, 200) << scraped.error;
  EXPECT_EQ(testing::HttpCall((*node)->metrics_port(), "GET", "/healthz").body, "ok\n");
  EXPECT_EQ(testing::HttpCall((*node)->metrics_port(), "GET", "/nope").status, 404);
  const std::string& text = scraped.body;
  for (const char* name :
       {"verdict_node_outbox_records{shard=\"15\"}", "verdict_node_outbox_free_disk_bytes",
        "verdict_node_result_channel_occupancy", "verdict_node_finished_room_oldest_dwell_seconds",
        "verdict_node_disk_full_eta_seconds", "verdict_node_backlog_drain_eta_seconds",
        "verdict_node_delivery_attempt_seconds_bucket"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
}

// The value of the unlabeled series `name` in a /metrics text (NaN when it is absent).
double Gauge(const std::string& text, const std::string& name) {
  return testing::MetricValue(text, name, std::nan(""));
}

// The derived gauges of docs/design.md §6 on a simulated clock, against figures worked out by hand:
// R and C are the results stored and resolved over the samples' span, T = D / (S x R) with S the
// mean record size (2 KiB when the outbox is empty), and the drain ETA N / (C - R). The outbox
// answers with pinned figures (N, its bytes, D); stored and resolved move only when the test
// says.
TEST_F(BattleNodeTest, DerivedGaugesFollowTheRatesOnTheSimulatedClock) {
  {  // 30 results a previous run stored, which the node resolves once the lobby answers
    auto earlier = storage::OpenOutbox(dir_.path(), {});
    ASSERT_TRUE(earlier.ok());
    std::vector<v1::BattleResult> results;
    for (uint64_t room = 101; room <= 130; ++room) results.push_back(testing::MakeResult(room));
    ASSERT_TRUE((*earlier)->Enqueue(results).ok());
  }
  // The lobby holds every request until the test lets it answer (200).
  std::promise<void> answer;
  std::shared_future<void> answering = answer.get_future().share();
  lobby_.SetHandler([answering](const testing::FakeRequest&) {
    answering.wait_for(60s);
    return testing::FakeReply{};
  });
  FakeClock clock;
  NodeOptions o = Options(lobby_.url());
  o.clock = &clock;
  o.metrics_listen = "127.0.0.1:0";
  o.delivery.attempt_timeout = 60s;  // the held requests do not time out
  storage::OutboxStats pinned;
  pinned.records = 1000;                   // N
  pinned.bytes = 2'000'000;                // S = 2,000 bytes a record
  pinned.free_disk_bytes = 1'000'000'000;  // D
  o.wrap_outbox = [this, &pinned](std::unique_ptr<storage::Outbox> inner) {
    auto wrapped = std::make_unique<FailingOutbox>(std::move(inner));
    wrapped->set_stats(pinned);
    failing_ = wrapped.get();
    return std::unique_ptr<storage::Outbox>(std::move(wrapped));
  };
  auto started = BattleNode::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  BattleNode& node = **started;
  const auto scrape = [&] {
    return testing::HttpCall(node.metrics_port(), "GET", "/metrics").body;
  };
  // Waits until the maintenance pass has sampled what the test set up: the pass after the one
  // that may be under way.
  const auto after_next_sample = [&] {
    const int calls = failing_->stats_calls();
    return WaitUntil([&] { return failing_->stats_calls() >= calls + 2; });
  };
  const double kInf = std::numeric_limits<double>::infinity();

  // Nothing stored or resolved yet (the sample Start took): no rate, so neither the disk nor the
  // backlog has an end in sight.
  std::string text = scrape();
  EXPECT_EQ(Gauge(text, "verdict_node_ingest_rate"), 0) << text;
  EXPECT_EQ(Gauge(text, "verdict_node_delivery_rate"), 0);
  EXPECT_EQ(Gauge(text, "verdict_node_disk_full_eta_seconds"), kInf);
  EXPECT_EQ(Gauge(text, "verdict_node_backlog_drain_eta_seconds"), kInf);

  // Ten rooms finish (stored 10) and, 5 s later, the lobby answers for all 40 results
  // (resolved 40).
  for (uint64_t room = 1; room <= 10; ++room) {
    AbortRoom(node, room);
  }
  ASSERT_TRUE(WaitUntil([&] { return node.stored() == 10; }));
  clock.AdvanceMs(5000);
  answer.set_value();
  ASSERT_TRUE(WaitUntil([&] { return node.resolved() == 40; })) << node.resolved();
  ASSERT_TRUE(after_next_sample());
  text = scrape();
  // R = 10 / 5 s, C = 40 / 5 s, T = 1e9 / (2,000 x 2), drain ETA = 1,000 / (8 - 2).
  EXPECT_DOUBLE_EQ(Gauge(text, "verdict_node_ingest_rate"), 2) << text;
  EXPECT_DOUBLE_EQ(Gauge(text, "verdict_node_delivery_rate"), 8);
  EXPECT_DOUBLE_EQ(Gauge(text, "verdict_node_disk_full_eta_seconds"), 250'000);
  EXPECT_NEAR(Gauge(text, "verdict_node_backlog_drain_eta_seconds"), 1000.0 / 6, 1e-6);

  // The backlog gone: it drains in no time, and records are taken to be 2 KiB.
  pinned.records = 0;
  pinned.bytes = 0;
  failing_->set_stats(pinned);
  ASSERT_TRUE(after_next_sample());
  text = scrape();
  // Drain ETA 0; T = 1e9 / (2,048 x 2).
  EXPECT_DOUBLE_EQ(Gauge(text, "verdict_node_backlog_drain_eta_seconds"), 0) << text;
  EXPECT_DOUBLE_EQ(Gauge(text, "verdict_node_disk_full_eta_seconds"), 244'140.625);
  EXPECT_DOUBLE_EQ(Gauge(text, "verdict_node_ingest_rate"), 2);
}

// A delivery loop that keeps failing turns /healthz to 503 with the shard and the reason.
TEST_F(BattleNodeTest, HealthzReportsADeliveryLoopThatKeepsFailing) {
  NodeOptions o = Options(lobby_.url());
  o.metrics_listen = "127.0.0.1:0";
  o.shards = 1;
  o.delivery.initial_backoff = 5ms;  // restarts come quickly
  o.wrap_outbox = [this](std::unique_ptr<storage::Outbox> inner) {
    auto wrapped = std::make_unique<FailingOutbox>(std::move(inner));
    wrapped->set_throw_on_reads(true);
    failing_ = wrapped.get();
    return std::unique_ptr<storage::Outbox>(std::move(wrapped));
  };
  auto node = BattleNode::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  testing::HttpResponse health;
  ASSERT_TRUE(WaitUntil([&] {
    health = testing::HttpCall((*node)->metrics_port(), "GET", "/healthz");
    return health.status == 503;
  }));
  EXPECT_NE(health.body.find("shard 0"), std::string::npos) << health.body;
  failing_->set_throw_on_reads(false);
  EXPECT_TRUE(WaitUntil(
      [&] { return testing::HttpCall((*node)->metrics_port(), "GET", "/healthz").status == 200; },
      30s));
}

// A full disk under the outbox while the lobby settles: every ack fails. /healthz answers 503
// "outbox writes are failing", the lobby gets each result once however many times the acks are
// retried (it used to get each about once a second, /healthz saying ok), and /healthz is ok
// again once the acks are written.
TEST_F(BattleNodeTest, HealthzReportsAcksThatCannotBeWrittenAndSettledResultsAreNotResent) {
  NodeOptions o = Options(lobby_.url());
  o.metrics_listen = "127.0.0.1:0";
  o.shards = 1;
  o.delivery.initial_backoff = 5ms;  // many ack retries in little time
  o.delivery.max_backoff = 20ms;
  o.wrap_outbox = [this](std::unique_ptr<storage::Outbox> inner) {
    auto wrapped = std::make_unique<FailingOutbox>(std::move(inner));
    wrapped->set_fail_acks(true);
    failing_ = wrapped.get();
    return std::unique_ptr<storage::Outbox>(std::move(wrapped));
  };
  auto node = BattleNode::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  for (uint64_t room = 1; room <= 5; ++room) AbortRoom(**node, room);
  ASSERT_TRUE(WaitUntil([&] { return lobby_.requests().size() >= 5; }));
  testing::HttpResponse health;
  EXPECT_TRUE(WaitUntil([&] {
    health = testing::HttpCall((*node)->metrics_port(), "GET", "/healthz");
    return health.status == 503;
  }));
  EXPECT_NE(health.body.find("outbox writes are failing"), std::string::npos) << health.body;
  ASSERT_TRUE(WaitUntil([&] { return failing_->failed_acks() >= 20; }));
  EXPECT_EQ(lobby_.requests().size(), 5u) << "a result the lobby settled was sent again";

  failing_->set_fail_acks(false);
  EXPECT_TRUE(WaitUntil(
      [&] { return testing::HttpCall((*node)->metrics_port(), "GET", "/healthz").status == 200; }));
  EXPECT_TRUE(WaitUntil([&] { return Peer::outbox(**node).Stats()->records == 0; }));
  EXPECT_EQ(lobby_.requests().size(), 5u);
}

// One bad block in one shard's table file used to stop every shard (the node did not start).
// That shard stops alone now: /healthz answers 503 naming it, its alert gauge is 1, and the other
// shards deliver everything they hold.
TEST_F(BattleNodeTest, DamagedShardStopsAloneWithAnAlertWhileTheOthersDeliver) {
  constexpr uint32_t kShards = 4;
  constexpr uint64_t kRooms = 400;
  testing::MakeClosedOutbox(dir_.path(), kRooms, kShards);
  testing::FlipBytes(testing::TableFileOf(dir_.path(), 1), 1000, 4);
  std::set<uint64_t> healthy;
  for (uint64_t room = 1; room <= kRooms; ++room) {
    if (storage::RoomShard(room, kShards) != 1) healthy.insert(room);
  }

  NodeOptions o = Options(lobby_.url());
  o.shards = kShards;
  o.metrics_listen = "127.0.0.1:0";
  auto node = BattleNode::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_TRUE(lobby_.WaitForAccepted(healthy.size(), 30s));
  std::set<uint64_t> delivered;
  for (const auto& r : lobby_.accepted()) delivered.insert(r.room_id());
  EXPECT_EQ(delivered, healthy);

  const auto health = testing::HttpCall((*node)->metrics_port(), "GET", "/healthz");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("shard-001"), std::string::npos) << health.body;
  EXPECT_NE(health.body.find("salvage"), std::string::npos) << health.body;
  const std::string metrics = testing::HttpCall((*node)->metrics_port(), "GET", "/metrics").body;
  EXPECT_EQ(testing::MetricValue(metrics, "verdict_node_outbox_shard_damaged{shard=\"1\"}", -1), 1)
      << metrics;
  EXPECT_EQ(testing::MetricValue(metrics, "verdict_node_outbox_shard_damaged{shard=\"0\"}", -1), 0);
  // Results still come in, into every shard.
  for (uint64_t room = kRooms + 1; room <= kRooms + 8; ++room) AbortRoom(**node, room);
  EXPECT_TRUE(WaitUntil([&] { return (*node)->stored() == 8; }));
  EXPECT_EQ((*node)->Health().code(), StatusCode::kDataLoss);
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::trunc) << content;
}

std::string ReadFile(const std::string& path) {
  std::stringstream content;
  content << std::ifstream(path).rdbuf();
  return content.str();
}

// verdict-node started with a token the lobby refuses keeps its result (nothing dead-lettered)
// and delivers it once SIGHUP has re-read the corrected token from its token file, or from its
// --config file.
class SighupTest : public BattleNodeTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool via_config() const { return GetParam(); }
  void WriteToken(const std::string& token) {
    WriteFile(token_file_, via_config() ? "token = " + token + "\n" : token + "\n");
  }
  std::vector<std::string> NodeArgs() const {
    std::vector<std::string> args{testing::NodeBinary()};
    if (via_config()) args.insert(args.end(), {"--config", token_file_});
    args.insert(args.end(),
                {"run", "--node-id", "node-a", "--outbox", outbox_, "--lobby", lobby_.url()});
    if (!via_config()) args.insert(args.end(), {"--lobby-token-file", token_file_});
    return args;
  }

  const std::string outbox_ = dir_.path() + "/outbox";
  const std::string token_file_ = dir_.path() + "/token";
};

TEST_P(SighupTest, ReloadsTheTokenAndDeliveryResumes) {
  lobby_.SetHandler([](const testing::FakeRequest& r) {
    return r.authorization == "Bearer token-new"
               ? testing::FakeReply{}
               : testing::ProblemReply(401, "UNAUTHENTICATED", false);
  });
  WriteFile(dir_.path() + "/result.json",
            wire::EncodeBody(testing::MakeResult(1), wire::BodyFormat::kJson).value());
  ASSERT_EQ(testing::RunCommand({testing::NodeBinary(), "enqueue", "--outbox", outbox_,
                                 dir_.path() + "/result.json"})
                .exit_code,
            0);
  WriteToken("token-old");
  const std::string log = dir_.path() + "/node.log";
  auto child = testing::ChildProcess::Start(NodeArgs(), {}, log);
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(lobby_.WaitForRequests(1, 10s)) << ReadFile(log);
  EXPECT_EQ(lobby_.requests()[0].authorization, "Bearer token-old");

  WriteToken("token-new");
  ASSERT_EQ(kill(child->pid(), SIGHUP), 0);
  ASSERT_TRUE(lobby_.WaitForAccepted(1, 10s)) << ReadFile(log);
  EXPECT_TRUE(child->Running()) << "SIGHUP ended the node";
  child->Terminate();
  const auto stats = testing::RunCommand(
      {testing::NodeBinary(), "outbox", "--outbox", outbox_, "stats", "--json"});
  EXPECT_NE(stats.out.find("\"dead_lettered\":0,"), std::string::npos) << stats.out;
  EXPECT_NE(ReadFile(log).find("lobby token reloaded"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(TokenSources, SighupTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "ConfigFile" : "TokenFile"; });

}  // namespace
}  // namespace verdict::node
