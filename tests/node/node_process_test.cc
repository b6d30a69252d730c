// verdict-node run as a process against an in-process fake lobby (no database, a few seconds
// each): a drain on exit after an outage delivers everything before its deadline, and one held up
// by a refused token completes once SIGHUP reloads it; a SIGHUP that comes while the loader runs
// the initialisers, while the node is still reading its flags, or at any moment of its start does
// not kill it, and READY=1 tells a service manager when one would not; `enqueue --to` splits a
// batch the node would refuse as too large; a broken ingest token file does not hold back the lobby
// token's reload; the progress line counts dead letters apart from deliveries.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "proto/validation.h"
#include "proto/wire.h"
#include "server/http_client.h"
#include "tests/support/fake_lobby.h"
#include "tests/support/process.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;
using server::BlockingHttpClient;
using server::ListenAddress;

// Sends `signal` to `node` if it still runs (never to pid -1 or 0, which would reach every
// process of the user or of the group); false if it does not.
bool Signal(ChildProcess& node, int signal) {
  return node.Running() && node.pid() > 0 && ::kill(node.pid(), signal) == 0;
}

// Whether `pid` blocks SIGHUP now (SigBlk of /proc/PID/status); nullopt once it has exited.
std::optional<bool> BlocksSighup(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("State:", 0) == 0 && line.find('Z') != std::string::npos) return std::nullopt;
    if (line.rfind("SigBlk:", 0) == 0) {
      return (std::stoull(line.substr(7), nullptr, 16) >> (SIGHUP - 1)) & 1;
    }
  }
  return std::nullopt;
}

class NodeProcessTest : public ::testing::Test {
 protected:
  // verdict-node run with an ingest socket, delivering to the fake lobby, plus `extra`.
  std::vector<std::string> NodeArgs(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {NodeBinary(),    "run",   "--node-id",       "node-a",
                                     "--outbox",      outbox_, "--lobby",         lobby_.url(),
                                     "--shards",      "4",     "--ingest-listen", "unix:" + socket_,
                                     "--progress-ms", "100"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<ChildProcess> StartNode(const std::vector<std::string>& extra) {
    auto node = ChildProcess::Start(NodeArgs(extra), {}, log_);
    EXPECT_NE(node, nullptr);
    EXPECT_TRUE(WaitUntil([&] { return Ready() == 200 || !node->Running(); }, 30s)) << Log();
    return node;
  }

  int Ready() {
    BlockingHttpClient client(Socket(), 2s);
    auto reply = client.Call({"GET", "/readyz", "", "", "", ""});
    return reply.ok() ? reply->status : 0;
  }

  // Posts results of `rooms` over the socket, one request each; true if every one was stored.
  bool Post(const std::vector<uint64_t>& rooms) {
    BlockingHttpClient client(Socket(), 10s);
    for (uint64_t room : rooms) {
      auto reply =
          client.Call({"POST", "/v1/results", "application/json", "", "",
                       wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value()});
      if (!reply.ok() || reply->status / 100 != 2) return false;
    }
    return true;
  }

  ListenAddress Socket() const { return ListenAddress::Parse("unix:" + socket_).value(); }

  std::string Log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  TempDir dir_;
  FakeLobby lobby_;
  const std::string outbox_ = dir_.Sub("outbox");
  const std::string socket_ = dir_.Sub("node.sock");
  const std::string log_ = dir_.Sub("node.log");
};

// The README's settings (--max-backoff 30, a drain of 25 s) after an outage whose lobby said
// Retry-After: 30: every room waits past the drain's deadline. SIGTERM, with the lobby back, must
// still deliver everything, and well before the deadline.
TEST_F(NodeProcessTest, ADrainAfterAnOutageDeliversEverythingBeforeItsDeadline) {
  std::atomic<bool> outage{true};
  lobby_.SetBatchHandler([&](const std::vector<FakeRequest>&) -> std::optional<FakeReply> {
    if (!outage) return std::nullopt;
    FakeReply reply = ProblemReply(503, "UNAVAILABLE", true);
    reply.headers.emplace_back("Retry-After", "30");
    return reply;
  });
  auto node = StartNode({"--token", "token-a", "--max-backoff", "30", "--drain-on-exit", "25"});
  ASSERT_NE(node, nullptr);
  std::vector<uint64_t> rooms;
  for (uint64_t room = 1; room <= 20; ++room) rooms.push_back(room);
  ASSERT_TRUE(Post(rooms)) << Log();
  ASSERT_TRUE(lobby_.WaitForRequests(20, 10s)) << "every room should have met the outage";
  outage = false;
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(Signal(*node, SIGTERM)) << Log();
  ASSERT_TRUE(node->WaitFor(40s)) << Log();
  EXPECT_EQ(node->exit_code(), 0) << Log();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 20s) << "it waited out the backoffs";
  EXPECT_EQ(lobby_.accepted().size(), 20u) << Log();
  EXPECT_NE(Log().find("drained: the outbox is empty"), std::string::npos) << Log();
}

// The drain of a node whose lobby refuses its token: the token file is corrected and SIGHUP sent
// while the node drains. The drain used to take the SIGHUP and do nothing with it, then exit 75
// with every result left; it must reload the token, deliver everything and exit 0, the outbox
// empty.
TEST_F(NodeProcessTest, ASighupDuringTheDrainReloadsTheTokenAndTheDrainCompletes) {
  const std::string token_file = dir_.Sub("lobby.token");
  std::ofstream(token_file) << "token-old\n";
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.authorization == "Bearer token-new" ? FakeReply{}
                                                 : ProblemReply(401, "UNAUTHENTICATED", false);
  });
  auto node = StartNode({"--lobby-token-file", token_file, "--drain-on-exit", "20"});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(Post({1, 2, 3, 4, 5})) << Log();
  ASSERT_TRUE(lobby_.WaitForRequests(1, 10s)) << Log();
  ASSERT_TRUE(Signal(*node, SIGTERM)) << Log();
  ASSERT_TRUE(WaitUntil([&] {
    return !node->Running() || Log().find("draining: delivering") != std::string::npos;
  })) << Log();
  std::ofstream(token_file) << "token-new\n";
  ASSERT_TRUE(Signal(*node, SIGHUP)) << Log();
  ASSERT_TRUE(node->WaitFor(40s)) << Log();
  EXPECT_EQ(node->exit_code(), 0) << Log();
  EXPECT_NE(Log().find("SIGHUP: lobby token reloaded"), std::string::npos) << Log();
  EXPECT_EQ(lobby_.accepted().size(), 5u) << Log();
  const CommandResult stats = RunCommand({NodeBinary(), "outbox", "--outbox", outbox_, "stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.out;
  EXPECT_NE(stats.out.find("pending 0 "), std::string::npos) << stats.out;
}

// A SIGHUP sent while the dynamic loader runs the shared libraries' initialisers (by a preloaded
// library's own initialiser, at the same point every run) killed the node: SIGHUP was blocked
// first thing in main, after those and the static initialisers. Blocked from the executable's
// .preinit_array, which the loader runs before them, it waits, and reloads once the node serves.
TEST_F(NodeProcessTest, ASighupDuringTheInitialisersWaitsForTheNode) {
  auto node = ChildProcess::Start(NodeArgs({"--token", "token-a", "--log-level", "info"}),
                                  {{"LD_PRELOAD", VERDICT_HANGUP_AT_LOAD}}, log_);
  ASSERT_NE(node, nullptr);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return !node->Running() || Log().find("SIGHUP: lobby token reloaded") != std::string::npos;
      },
      30s))
      << Log();
  ASSERT_TRUE(node->Running()) << "killed by signal: " << node->killed_by_signal() << "\n" << Log();
  Signal(*node, SIGTERM);
  EXPECT_TRUE(node->WaitFor(30s));
  EXPECT_EQ(node->exit_code(), 0) << Log();
}

// 50 nodes, each sent SIGHUP at a delay spread over 0-20 ms: every one survives, reloads its
// token and exits 0 on SIGTERM. The delays count from the moment the node's SIGHUP shows blocked
// in /proc (polled without sleeping): the earliest any in-process means can hold a signal, the
// guard in .preinit_array (cli/hangup_guard.h), so delay 0 is the guard's first moment and the
// spread covers the loader's initialisers, the static initialisers, the flags, the outbox's open
// and the listeners. Below that moment nothing is guaranteed in the process: from the exec to
// the end of the loader's relocation (19 libraries, 17,000 symbol relocations: 1 ms of CPU when
// they are in the page cache, several ms of wall time on a busy machine) a SIGHUP still kills it.
// Under systemd the unit covers that window: Type=notify runs no ExecReload before the node is
// ready, and RestartForceExitStatus= SIGHUP restarts a node a hand-sent early SIGHUP killed
// (docs/operating.md).
TEST_F(NodeProcessTest, ASighupAtAnyMomentOfTheStartAfterTheGuardWaitsForTheNode) {
  sigset_t own;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &own), 0);
  ASSERT_FALSE(sigismember(&own, SIGHUP)) << "the node would inherit a blocked SIGHUP";
  constexpr int kNodes = 50;
  for (int i = 0; i < kNodes; ++i) {
    const auto delay = std::chrono::microseconds(20'000 * i / (kNodes - 1));
    const std::string log = dir_.Sub("spread-" + std::to_string(i) + ".log");
    auto node =
        ChildProcess::Start(NodeArgs({"--token", "token-a", "--log-level", "info"}), {}, log);
    ASSERT_NE(node, nullptr);
    std::optional<bool> blocked;
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while ((blocked = BlocksSighup(node->pid())) == false &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    ASSERT_TRUE(blocked.value_or(false)) << "node " << i << " exited or never blocked SIGHUP\n"
                                         << std::ifstream(log).rdbuf();
    std::this_thread::sleep_until(std::chrono::steady_clock::now() + delay);
    ASSERT_TRUE(Signal(*node, SIGHUP)) << "node " << i;
    const auto text = [&] {
      std::ifstream in(log);
      return std::string((std::istreambuf_iterator<char>(in)), {});
    };
    EXPECT_TRUE(WaitUntil(
        [&] {
          return !node->Running() ||
                 text().find("SIGHUP: lobby token reloaded") != std::string::npos;
        },
        30s))
        << "node " << i << "\n"
        << text();
    ASSERT_TRUE(node->Running()) << "node " << i << ", SIGHUP " << delay.count()
                                 << " us after its guard, killed by signal: "
                                 << node->killed_by_signal() << "\n"
                                 << text();
    Signal(*node, SIGTERM);
    ASSERT_TRUE(node->WaitFor(30s)) << "node " << i;
    ASSERT_EQ(node->exit_code(), 0) << "node " << i << "\n" << text();
  }
}

// Under a unit of Type=notify, systemd runs ExecReload only once the node said READY=1 on
// $NOTIFY_SOCKET: it must say so, and only once a SIGHUP is a reload. One sent right after the
// datagram is taken as a reload, and the node runs on.
TEST_F(NodeProcessTest, ReadyIsToldToTheServiceManagerOnceSighupReloads) {
  const std::string notify = dir_.Sub("notify.sock");
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", notify.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  const timeval wait{30, 0};
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)), 0);
  auto node = ChildProcess::Start(NodeArgs({"--token", "token-a", "--log-level", "info"}),
                                  {{"NOTIFY_SOCKET", notify}}, log_);
  ASSERT_NE(node, nullptr);
  char message[64] = {};
  const ssize_t got = ::recv(fd, message, sizeof(message) - 1, 0);
  ::close(fd);
  ASSERT_GT(got, 0) << "no word from the node\n" << Log();
  EXPECT_EQ(std::string(message, got), "READY=1");
  ASSERT_TRUE(Signal(*node, SIGHUP)) << Log();
  EXPECT_TRUE(WaitUntil([&] {
    return !node->Running() || Log().find("SIGHUP: lobby token reloaded") != std::string::npos;
  })) << Log();
  ASSERT_TRUE(node->Running()) << Log();
  Signal(*node, SIGTERM);
  EXPECT_TRUE(node->WaitFor(30s));
  EXPECT_EQ(node->exit_code(), 0) << Log();
}

// Opens the FIFO at `path` for writing once `reader` opens it to read (it waits in open, then
// in read, until the token is written); -1 if the reader is gone or none came within 20 s.
int OpenOnceRead(const std::string& path, ChildProcess& reader) {
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  int fd = -1;
  while ((fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK)) < 0) {
    if (errno != ENXIO || !reader.Running() || std::chrono::steady_clock::now() > give_up) {
      return -1;
    }
    std::this_thread::sleep_for(1ms);
  }
  return fd;
}

// Writes `content` into the FIFO `fd` and closes it: the reader reads it to its end.
bool Feed(int fd, const std::string& content) {
  const bool written =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  return written;
}

// A SIGHUP while the node is still reading its flags (its lobby token file, a FIFO here, which
// holds it there until the test writes the token) used to kill it: SIGHUP's default action, and
// systemd counts that as a clean exit. It must wait, and reload the tokens once the node runs.
TEST_F(NodeProcessTest, ASighupBeforeTheNodeRunsWaitsForIt) {
  const std::string fifo = dir_.Sub("token.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto node = ChildProcess::Start(NodeArgs({"--lobby-token-file", fifo}), {}, log_);
  ASSERT_NE(node, nullptr);
  // Once a writer can open the FIFO, the node has it open and waits for the token in main.
  const int first = OpenOnceRead(fifo, *node);
  ASSERT_GE(first, 0) << "the node never read its token file\n" << Log();
  ASSERT_TRUE(Signal(*node, SIGHUP)) << Log();
  ASSERT_TRUE(Feed(first, "token-a\n"));
  // Once it runs (its first line is out, the token file long closed), the SIGHUP reloads the
  // token from the FIFO again.
  ASSERT_TRUE(WaitUntil([&] {
    return !node->Running() || Log().find("waiting in the outbox at start") != std::string::npos;
  })) << Log();
  const int again = OpenOnceRead(fifo, *node);
  ASSERT_GE(again, 0) << "the node died or never reloaded\n" << Log();
  ASSERT_TRUE(Feed(again, "token-a\n"));
  EXPECT_TRUE(WaitUntil([&] { return Ready() == 200 || !node->Running(); }, 30s));
  EXPECT_TRUE(node->Running()) << "killed by signal: " << node->killed_by_signal() << "\n" << Log();
  EXPECT_TRUE(WaitUntil([&] {
    return Log().find("SIGHUP: lobby token reloaded") != std::string::npos;
  })) << Log();
  Signal(*node, SIGTERM);
  EXPECT_TRUE(node->WaitFor(30s));
  EXPECT_EQ(node->exit_code(), 0) << Log();
}

// 256 results of the largest size the node takes are more than one batch's 4 MiB: `enqueue --to`
// used to send them as one batch, got 413, stored nothing and exited 1.
TEST_F(NodeProcessTest, EnqueueToSplitsWhatOneBatchCannotHold) {
  const std::string node_id(wire::kMaxStringBytes, 'n');  // a string field of the largest size
  std::vector<std::string> args = NodeArgs({"--token", "token-a"});
  args[3] = node_id;
  auto node = ChildProcess::Start(args, {}, log_);
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return Ready() == 200 || !node->Running(); }, 30s)) << Log();
  const std::string file = dir_.Sub("large.jsonl");
  size_t bytes = 0;
  {
    std::ofstream out(file);
    for (uint64_t room = 1; room <= wire::kMaxBatchResults; ++room) {
      v1::BattleResult r;
      r.set_room_id(room);
      r.set_outcome(v1::ABORTED);
      r.set_ended_at_ms(1'700'000'000'000);
      r.set_node_id(node_id);
      r.set_replay_path(std::string(wire::kMaxStringBytes, 'r'));
      r.set_abort_reason(std::string(wire::kMaxStringBytes, 'a'));
      for (uint32_t i = 0; i < wire::kMaxPlayers; ++i) {
        v1::PlayerResult* p = r.add_players();
        std::string id = std::to_string(room * 1000 + i);  // the longest id: 64 bytes
        p->set_player_id(std::string(wire::kMaxPlayerIdBytes - id.size(), 'p') + id);
        p->set_team(i % 2 + 1);
        p->set_kills(INT32_MAX);  // the largest statistics a result may carry
        p->set_deaths(INT32_MAX);
        p->set_assists(INT32_MAX);
        p->set_score(INT64_MIN);
        p->set_disconnected(true);
      }
      bytes += r.ByteSizeLong();
      out << wire::EncodeBody(r, wire::BodyFormat::kJson).value() << "\n";
    }
  }
  ASSERT_GT(bytes, wire::kMaxBatchBodyBytes) << "the results fit one batch: nothing is tested";
  const CommandResult r = RunCommand({NodeBinary(), "enqueue", "--to", "unix:" + socket_, file});
  EXPECT_EQ(r.exit_code, 0) << r.out << Log();
  EXPECT_EQ(r.out, "256 new, 0 already present\n");
  Signal(*node, SIGTERM);
  EXPECT_TRUE(node->WaitFor(30s));
}

// SIGHUP with the lobby's token rotated and the ingest token's file broken (gone): the lobby
// token is reloaded all the same, and delivery, refused with the old one, resumes.
TEST_F(NodeProcessTest, ABrokenIngestTokenFileDoesNotHoldBackTheLobbyToken) {
  const std::string lobby_token = dir_.Sub("lobby.token");
  const std::string ingest_token = dir_.Sub("ingest.token");
  std::ofstream(lobby_token) << "token-old\n";
  std::ofstream(ingest_token) << "ingest-secret\n";
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.authorization == "Bearer token-new" ? FakeReply{}
                                                 : ProblemReply(401, "UNAUTHENTICATED", false);
  });
  auto node = StartNode({"--lobby-token-file", lobby_token, "--ingest-token-file", ingest_token,
                         "--ingest-listen", "127.0.0.1:0"});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(Post({7}));
  ASSERT_TRUE(lobby_.WaitForRequests(1, 10s)) << Log();
  std::ofstream(lobby_token) << "token-new\n";
  std::filesystem::remove(ingest_token);
  ASSERT_TRUE(Signal(*node, SIGHUP)) << Log();
  EXPECT_TRUE(lobby_.WaitForAccepted(1, 20s)) << "the lobby token was not reloaded\n" << Log();
  EXPECT_TRUE(WaitUntil([&] {
    const std::string log = Log();
    return log.find("SIGHUP: lobby token reloaded") != std::string::npos &&
           log.find("SIGHUP: ingest token not reloaded") != std::string::npos;
  })) << Log();
  Signal(*node, SIGTERM);
  EXPECT_TRUE(node->WaitFor(30s));
}

// One result settled and one refused for good: the progress line says one delivered and one in
// dead letter, where it said two delivered.
TEST_F(NodeProcessTest, TheProgressLineCountsDeadLettersApartFromDeliveries) {
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.result.room_id() == 2 ? ProblemReply(404, "ROOM_UNKNOWN", false) : FakeReply{};
  });
  auto node = StartNode({"--token", "token-a"});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(Post({1, 2}));
  ASSERT_TRUE(WaitUntil([&] { return Log().find("moved to dead letter") != std::string::npos; }))
      << Log();
  ASSERT_TRUE(lobby_.WaitForAccepted(1, 10s));
  Signal(*node, SIGTERM);
  ASSERT_TRUE(node->WaitFor(30s));
  const std::string log = Log();
  const size_t last = log.rfind("stored ");
  ASSERT_NE(last, std::string::npos) << log;
  const std::string line = log.substr(last, log.find('\n', last) - last);
  EXPECT_NE(line.find("stored 2, delivered 1, backlog 0, dead letter 1"), std::string::npos)
      << line;
}

}  // namespace
}  // namespace verdict::testing
