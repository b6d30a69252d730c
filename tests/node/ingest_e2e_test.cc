// verdict-node's front door as a battle host meets it, against a real lobby on PostgreSQL: a
// node SIGKILLed right after its 2xx answers loses none of those results (and its negative
// control, answering before the fsync, is caught losing them); a full disk under the outbox
// answers 503 and recovers; --drain-on-exit with the lobby up and down; the Unix socket's life;
// `enqueue --to`; and a result dead-lettered for want of its room's allocation, redriven through
// the running node once the room is allocated.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "proto/wire.h"
#include "server/http_client.h"
#include "tests/lobby/lobby_fixture.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;
using server::BlockingHttpClient;
using server::ListenAddress;

class IngestEndToEndTest : public LobbyFixture {
 protected:
  // verdict-node run with an ingest socket in dir_, delivering to `lobby_port`.
  std::vector<std::string> NodeArgs(uint16_t lobby_port, const std::string& binary = NodeBinary(),
                                    const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args =
        NodeRunArgs(outbox_, lobby_port,
                    {"--ingest-listen", "unix:" + socket_, "--progress-ms", "500"}, binary);
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<ChildProcess> StartNode(const std::vector<std::string>& args,
                                          const std::map<std::string, std::string>& env = {}) {
    auto node = ChildProcess::Start(args, env, dir_.Sub("node.log"));
    EXPECT_NE(node, nullptr);
    EXPECT_TRUE(WaitUntil([&] { return Ready() == 200; }, 30s)) << Log();
    return node;
  }

  int Ready() {
    BlockingHttpClient client(ListenAddress::Parse("unix:" + socket_).value(), 2s);
    auto reply = client.Call({"GET", "/readyz", "", "", "", ""});
    return reply.ok() ? reply->status : 0;
  }

  std::string Log() {
    std::ifstream in(dir_.Sub("node.log"));
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  // Posts results of rooms [first, first + count) over the socket from `clients` threads, each
  // retrying a 503 or a failed connection until `deadline`; returns the rooms answered 2xx.
  std::set<uint64_t> PostConcurrently(uint64_t first, uint64_t count, int clients,
                                      std::chrono::seconds deadline = 60s) {
    std::mutex mu;
    std::set<uint64_t> acked;
    std::atomic<uint64_t> next{first};
    const auto give_up = std::chrono::steady_clock::now() + deadline;
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        BlockingHttpClient client(ListenAddress::Parse("unix:" + socket_).value(), 10s);
        for (uint64_t room = next++; room < first + count; room = next++) {
          const std::string body =
              wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value();
          while (std::chrono::steady_clock::now() < give_up) {
            auto reply = client.Call({"POST", "/v1/results", "application/json", "", "", body});
            if (reply.ok() && reply->status / 100 == 2) {
              std::lock_guard lock(mu);
              acked.insert(room);
              break;
            }
            if (reply.ok() && reply->status != 503) break;  // refused: not acked
            std::this_thread::sleep_for(50ms);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    return acked;
  }

  // Rooms of `acked` that do not have exactly one receipt and one match.
  std::vector<uint64_t> NotSettledOnce(const std::set<uint64_t>& acked) {
    std::vector<uint64_t> wrong;
    for (uint64_t room : acked) {
      const std::string r = std::to_string(room);
      if (Q("SELECT count(*) FROM settlement_receipts WHERE room_id = " + r) != "1" ||
          Q("SELECT count(*) FROM matches WHERE room_id = " + r) != "1") {
        wrong.push_back(room);
      }
    }
    return wrong;
  }

  // Kills a node right after `count` results were answered 2xx over its socket, restarts it
  // (the shipped binary) until its outbox is empty, and returns the acked rooms that did not
  // settle exactly once. Every write waits 300 ms (a slow disk), so that results answered before
  // they are durable are still in memory when the kill comes. nullopt if the run failed.
  std::optional<std::vector<uint64_t>> KillRightAfterAnswersThenRecover(
      const std::string& binary, const std::vector<std::string>& extra,
      std::set<uint64_t>* acked_out) {
    auto lobby = StartLobby();
    if (!lobby) return std::nullopt;
    constexpr uint64_t kFirst = 1000, kCount = 200;
    for (uint64_t room = kFirst; room < kFirst + kCount; ++room) MustAllocate(lobby->port(), room);
    auto node = StartNode(NodeArgs(lobby->port(), binary, extra),
                          {{"VERDICT_FAILPOINTS", "writer.before_sync=delay"}});
    if (!node) return std::nullopt;
    const std::set<uint64_t> acked = PostConcurrently(kFirst, kCount, 16);
    // A node that died on its own before the kill would prove nothing about answering early: the
    // loss must be the kill's.
    EXPECT_TRUE(node->Running()) << "the node died before it was killed\n" << Log();
    ::kill(node->pid(), SIGKILL);
    node->WaitFor(10s);
    EXPECT_TRUE(node->killed_by_signal()) << Log();
    *acked_out = acked;
    // Restart without the slow disk, and let it deliver everything it has.
    auto args = NodeArgs(lobby->port());
    args.push_back("--exit-when-drained");
    const CommandResult recovered = RunCommand(args);
    EXPECT_EQ(recovered.exit_code, 0) << recovered.out;
    if (recovered.exit_code != 0) return std::nullopt;
    return NotSettledOnce(acked);
  }

  TempDir dir_;
  const std::string outbox_ = dir_.Sub("outbox");
  const std::string socket_ = dir_.Sub("node.sock");
};

TEST_F(IngestEndToEndTest, KilledRightAfterItsAnswersTheNodeLosesNoAnsweredResult) {
  std::set<uint64_t> acked;
  const auto wrong = KillRightAfterAnswersThenRecover(NodeBinary(), {}, &acked);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(acked.size(), 200u) << "every post should have been answered 2xx";
  EXPECT_TRUE(wrong->empty()) << wrong->size() << " acked result(s) did not settle exactly once, "
                              << "the first room " << (wrong->empty() ? 0 : wrong->front());
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), std::to_string(acked.size()));
}

// Negative control: a node that answers before the fsync. The same kill loses results it
// answered 2xx, and the same check sees it.
TEST_F(IngestEndToEndTest, NegativeControlAnsweringBeforeTheFsyncIsCaughtLosingResults) {
  std::set<uint64_t> acked;
  const auto wrong = KillRightAfterAnswersThenRecover(NodeTestingBinary(),
                                                      {"--unsafe-answer-before-durable"}, &acked);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_FALSE(acked.empty());
  std::printf("negative control: %zu of %zu acked results lost\n", wrong->size(), acked.size());
  EXPECT_FALSE(wrong->empty()) << "answering before the fsync lost nothing: the kill test above "
                                  "cannot tell a safe node from an unsafe one";
}

// A small file system under the outbox, filled: posts are answered 503, never 2xx, while it is
// full; once space returns the node takes results again, and everything answered 2xx settles.
TEST_F(IngestEndToEndTest, AFullDiskAnswers503AndTheNodeRecoversWhenSpaceReturns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small file system";
  ASSERT_EQ(::mkdir(outbox_.c_str(), 0700), 0);
  ASSERT_EQ(::mount("tmpfs", outbox_.c_str(), "tmpfs", 0, "size=48m"), 0) << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{outbox_};
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 1; room <= 50; ++room) MustAllocate(lobby->port(), room);
  auto node = StartNode(NodeArgs(lobby->port(), NodeBinary(), {"--outbox-no-preallocate"}));
  ASSERT_NE(node, nullptr);
  // Fill what is left of the file system, then post.
  const std::string filler = outbox_ + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string mib(1 << 20, 'x');
    while (out.write(mib.data(), mib.size())) {
    }
  }
  BlockingHttpClient client(ListenAddress::Parse("unix:" + socket_).value(), 15s);
  int refused = 0, accepted_while_full = 0;
  for (uint64_t room = 1; room <= 50; ++room) {
    auto reply = client.Call({"POST", "/v1/results", "application/json", "", "",
                              wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value()});
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    if (reply->status == 503) ++refused;
    if (reply->status / 100 == 2) ++accepted_while_full;
  }
  EXPECT_GT(refused, 0) << "a full disk was never answered 503\n" << Log();
  EXPECT_EQ(Ready(), 503);
  // Everything answered 2xx must be durable: it settles once space returns.
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  ASSERT_TRUE(WaitUntil([&] { return Ready() == 200; }, 30s)) << Log();
  std::set<uint64_t> acked;
  for (uint64_t room = 1; room <= 50; ++room) {
    auto reply = client.Call({"POST", "/v1/results", "application/json", "", "",
                              wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value()});
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->status / 100, 2) << reply->body;
    acked.insert(room);
  }
  EXPECT_TRUE(WaitUntil([&] { return NotSettledOnce(acked).empty(); }, 60s)) << Log();
  ::kill(node->pid(), SIGTERM);
  EXPECT_TRUE(node->WaitFor(60s));
}

TEST_F(IngestEndToEndTest, DrainOnExitWithTheLobbyUpExits0WithAnEmptyOutbox) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 1; room <= 100; ++room) MustAllocate(lobby->port(), room);
  // Each delivery holds its ack 300 ms, so results are still waiting when SIGTERM comes.
  auto node = StartNode(NodeArgs(lobby->port(), NodeBinary(), {"--drain-on-exit", "60"}),
                        {{"VERDICT_FAILPOINTS", "deliver.after_2xx_before_ack=delay"}});
  ASSERT_NE(node, nullptr);
  const auto acked = PostConcurrently(1, 100, 4);
  ASSERT_EQ(acked.size(), 100u);
  const CommandResult before =
      RunCommand({NodeBinary(), "outbox", "--outbox", outbox_, "stats", "--json"});
  ASSERT_EQ(before.out.find("\"records\":0,"), std::string::npos)
      << "everything was delivered before SIGTERM: the drain is not tested\n"
      << before.out;
  ASSERT_EQ(::kill(node->pid(), SIGTERM), 0);
  ASSERT_TRUE(node->WaitFor(90s)) << Log();
  EXPECT_EQ(node->exit_code(), 0) << Log();
  EXPECT_TRUE(NotSettledOnce(acked).empty());
  const CommandResult stats =
      RunCommand({NodeBinary(), "outbox", "--outbox", outbox_, "stats", "--json"});
  EXPECT_NE(stats.out.find("\"records\":0,"), std::string::npos) << stats.out;
}

TEST_F(IngestEndToEndTest, DrainOnExitWithTheLobbyDownExits75KeepingEveryResult) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  lobby->Stop();  // the lobby is gone: nothing can be delivered
  auto node = StartNode(NodeArgs(port, NodeBinary(), {"--drain-on-exit", "2"}));
  ASSERT_NE(node, nullptr);
  ASSERT_EQ(PostConcurrently(1, 20, 4).size(), 20u);
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(node->pid(), SIGTERM), 0);
  // While it drains, it takes no more results.
  EXPECT_TRUE(WaitUntil([&] { return Ready() == 503; }, 5s));
  ASSERT_TRUE(node->WaitFor(60s)) << Log();
  EXPECT_GE(std::chrono::steady_clock::now() - asked, 2s) << "it did not wait for the deadline";
  EXPECT_EQ(node->exit_code(), 75) << Log();
  EXPECT_NE(Log().find("20 result(s) remain undelivered in the outbox"), std::string::npos)
      << Log();
  const CommandResult stats =
      RunCommand({NodeBinary(), "outbox", "--outbox", outbox_, "stats", "--json"});
  EXPECT_NE(stats.out.find("\"records\":20,"), std::string::npos) << stats.out;
}

TEST_F(IngestEndToEndTest, TheSocketIsRefusedWhileLiveReplacedWhenStaleAndRemovedAtExit) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  auto first = StartNode(NodeArgs(lobby->port()));
  ASSERT_NE(first, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // A second node on the same socket (its own outbox) is refused and says why.
  auto second_args = NodeArgs(lobby->port());
  second_args[7] = dir_.Sub("outbox-2");
  const CommandResult second = RunCommand(second_args);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_EQ(Ready(), 200) << "the refused node took the live socket";
  // Killed, the first leaves its socket behind; the next node replaces it.
  ::kill(first->pid(), SIGKILL);
  first->WaitFor(10s);
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  auto third = StartNode(NodeArgs(lobby->port()));
  ASSERT_NE(third, nullptr);
  ::kill(third->pid(), SIGTERM);
  ASSERT_TRUE(third->WaitFor(60s));
  EXPECT_EQ(third->exit_code(), 0) << Log();
  EXPECT_NE(::stat(socket_.c_str(), &st), 0) << "the socket outlived the node";
}

TEST_F(IngestEndToEndTest, EnqueueToARunningNodeReportsStoredDuplicateAndRefused) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const std::string tcp = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  auto node = StartNode(
      NodeArgs(lobby->port(), NodeBinary(), {"--ingest-listen", tcp, "--ingest-token", "s3cret"}));
  ASSERT_NE(node, nullptr);
  const std::string good = dir_.Sub("good.jsonl");
  {
    std::ofstream out(good);
    for (uint64_t room : {1, 2, 3}) {
      out << wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value() << "\n";
    }
  }
  const std::string to = "unix:" + socket_;
  auto r = RunCommand({NodeBinary(), "enqueue", "--to", to, good});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "3 new, 0 already present\n");
  // While the node runs, writing its outbox directly is refused, naming --to.
  r = RunCommand({NodeBinary(), "enqueue", "--outbox", outbox_, good});
  EXPECT_NE(r.exit_code, 0);
  const std::string bad = dir_.Sub("bad.jsonl");
  {
    std::ofstream out(bad);
    v1::BattleResult room0 = MakeResult(4);
    room0.set_room_id(0);
    out << wire::EncodeBody(MakeResult(1), wire::BodyFormat::kJson).value() << "\n"
        << wire::EncodeBody(room0, wire::BodyFormat::kJson).value() << "\n"
        << wire::EncodeBody(MakeResult(5), wire::BodyFormat::kJson).value() << "\n";
  }
  r = RunCommand({NodeBinary(), "enqueue", "--to", to, bad});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out, "1 new, 1 already present, 1 refused\n");
  // Over TCP the token is required, and with it the same results are duplicates.
  r = RunCommand({NodeBinary(), "enqueue", "--to", tcp, good});
  EXPECT_NE(r.exit_code, 0);
  r = RunCommand({NodeBinary(), "enqueue", "--to", tcp, "--ingest-token", "wrong", good});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  r = RunCommand({NodeBinary(), "enqueue", "--to", tcp, "--ingest-token", "s3cret", good});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(" new, "), std::string::npos) << r.out;
}

// The matchmaker could not allocate room 4242 (the lobby was away) and the battle was played all
// the same: the lobby refuses its result ROOM_UNKNOWN for good and the node dead-letters it. The
// node serves every game server of its machine, so it is not stopped to redrive: the redrive the
// outbox command does itself is refused (the node holds the outbox) and names --via-node; once
// the allocation is made, the redrive through the running node moves the result back, and it is
// delivered and settles once.
TEST_F(IngestEndToEndTest, ADeadLetteredResultRedrivenThroughTheRunningNodeSettles) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  auto node = StartNode(NodeArgs(lobby->port()));
  ASSERT_NE(node, nullptr);
  constexpr uint64_t kRoom = 4242;
  BlockingHttpClient client(ListenAddress::Parse("unix:" + socket_).value(), 10s);
  auto posted = client.Call({"POST", "/v1/results", "application/json", "", "",
                             wire::EncodeBody(MakeResult(kRoom), wire::BodyFormat::kJson).value()});
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  ASSERT_EQ(posted->status, 201) << posted->body;
  const auto stats = [&] {
    return RunCommand({NodeBinary(), "outbox", "--outbox", outbox_, "stats"}).out;
  };
  ASSERT_TRUE(WaitUntil([&] { return stats().find("dead letter 1,") != std::string::npos; }, 30s))
      << stats() << Log();

  const std::string room = std::to_string(kRoom);
  const ExitAndOutput direct = RunToExit(
      {NodeBinary(), "outbox", "--outbox", outbox_, "redrive", "--from", "dead-letter", room});
  EXPECT_EQ(direct.code, 1) << direct.output;
  EXPECT_NE(direct.output.find("--via-node"), std::string::npos) << direct.output;

  MustAllocate(lobby->port(), kRoom);
  const ExitAndOutput redriven = RunToExit({NodeBinary(), "outbox", "redrive", "--via-node",
                                            "unix:" + socket_, "--from", "dead-letter", room});
  EXPECT_EQ(redriven.code, 0) << redriven.output << Log();
  EXPECT_NE(redriven.output.find("1 moved back to their shards, 0 left"), std::string::npos)
      << redriven.output;
  EXPECT_TRUE(WaitUntil(
      [&] { return Q("SELECT count(*) FROM settlement_receipts WHERE room_id = " + room) == "1"; },
      30s))
      << Log();
  EXPECT_TRUE(NotSettledOnce({kRoom}).empty());
  EXPECT_TRUE(WaitUntil([&] { return stats().find("pending 0 ") != std::string::npos; }, 30s))
      << stats();
  EXPECT_NE(stats().find("dead letter 0,"), std::string::npos) << stats();
  ::kill(node->pid(), SIGTERM);
  ASSERT_TRUE(node->WaitFor(30s));
  EXPECT_EQ(node->exit_code(), 0) << Log();
}

}  // namespace
}  // namespace verdict::testing
