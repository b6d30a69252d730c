// The lobby's database fails over. A pg_auto_failover formation on this machine
// (scripts/lib/ha.sh: a monitor, a primary and a standby, each on its own port, socket directory
// and temporary directory), two lobby instances on a connection string that names both nodes
// and asks for the writable one, and a node simulating a few thousand battles and delivering
// their results to both lobbies. Mid-load the primary node dies: its keeper, postmaster and
// backends SIGKILLed at once. The monitor promotes the standby; meanwhile the lobbies answer 503
// with Retry-After and /readyz says they hold no writable connection; then they reconnect to
// the new primary. After the load, a drain and a reconcile, the invariant checker
// (invariants.h) holds the new primary to verdict's promises: every result the node reported
// stored has exactly one receipt, nothing lost or settled twice, Elo zero-sum, no player left in
// battle.
//
// With a synchronous standby that holds: a 2xx is only sent once the standby has the commit.
// The negative control makes the standby asynchronous and pauses replication (SIGSTOP of the
// WAL sender and receiver) before the kill, so that results answered 2xx meanwhile exist only
// on the old primary: the same checks must report them lost.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/fault/invariants.h"
#include "tests/fault/node_command.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

void Sleep(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

// The battles: enough that the kill lands mid-load and the node still has results to deliver
// while the standby is promoted.
constexpr int kRooms = 3000;
constexpr int kRoomsPerSecond = 200;
constexpr int kBattleMs = 500;

// The sum of the series in a process's /metrics whose line starts with `series` (a metric's
// name and '{' for all its labeled series, or a name with some labels); 0 if none.
double MetricSum(uint16_t port, const std::string& series) {
  const HttpResponse r = HttpCall(port, "GET", "/metrics", {}, "", 2s);
  double sum = 0;
  std::istringstream in(r.status == 200 ? r.body : "");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series, 0) == 0) sum += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return sum;
}

std::string LastLine(const std::string& text) {
  std::istringstream in(text);
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  return last;
}

size_t LineCount(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// What a failover cost, as the test saw it.
struct Outage {
  double readyz_503_s = 0;    // from the first /readyz 503 to the first 200 after it
  bool retry_after = false;   // the 503 carried Retry-After
  double settled_before = 0;  // results settled per second over the 5 s before the kill
  double settled_during = 0;  // … from the kill until the lobbies were ready again
  double settled_after = 0;   // … over the 5 s after that
  std::string Summary() const {
    char out[256];
    std::snprintf(out, sizeof(out),
                  "%.1f s of /readyz 503%s; results settled per second: %.0f before the kill, "
                  "%.0f from the kill until ready again, %.0f after",
                  readyz_503_s, retry_after ? " (with Retry-After)" : " (no Retry-After)",
                  settled_before, settled_during, settled_after);
    return out;
  }
};

class FailoverSuite : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand({"/bin/sh", "-c", "command -v pg_autoctl"}).exit_code != 0) {
      if (std::getenv("VERDICT_REQUIRE_PG")) {
        FAIL() << "pg_autoctl is not installed (postgresql-15-auto-failover)";
      }
      GTEST_SKIP() << "pg_autoctl is not installed; run through ./scripts/test";
    }
    // Not under dir_: the servers run as `postgres` and must reach their directories. In
    // memory if possible: initdb and the standby's base backup sync every file, which on a
    // slow disk takes most of a minute.
    for (const char* base : {"/dev/shm", "/tmp"}) {
      std::string pattern = std::string(base) + "/verdict-ha-XXXXXX";
      if (::mkdtemp(pattern.data())) {
        ha_dir_ = pattern;
        break;
      }
    }
    ASSERT_FALSE(ha_dir_.empty()) << "cannot make a directory for the formation";
  }

  void TearDown() override {
    node_.reset();
    for (auto& lobby : lobbies_) lobby.reset();
    if (!ha_dir_.empty()) Ha({"stop", ha_dir_});
  }

  static CommandResult Ha(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/bin/bash", VERDICT_HA_SCRIPT};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  // Three free consecutive ports on 127.0.0.1 (VERDICT_HA_PORT fixes the first, plus `offset`),
  // below Linux's ephemeral range (32768 and up): the servers bind them seconds after they are
  // chosen, and a port in that range can meanwhile become the local end of any connection the
  // suite opens.
  static uint16_t FormationPorts(int offset) {
    if (const char* fixed = std::getenv("VERDICT_HA_PORT")) return std::atoi(fixed) + offset;
    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> first(20000, 32000);
    for (;;) {
      const auto port = static_cast<uint16_t>(first(random));
      if (PortFree(port) && PortFree(port + 1) && PortFree(port + 2)) return port;
    }
  }

  // Whether a listening socket can be bound to 127.0.0.1:`port` now.
  static bool PortFree(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return free;
  }
  // The formation, the schema on its primary, and two lobbies on the multi-host conninfo.
  void Start(bool async) {
    std::vector<std::string> start = {"start", ha_dir_,
                                      std::to_string(FormationPorts(async ? 3 : 0)), "--fast"};
    if (async) start.push_back("--async");
    const CommandResult ha = Ha(start);
    ASSERT_EQ(ha.exit_code, 0) << ha.out;
    conninfo_ = LastLine(ha.out);
    ASSERT_NE(conninfo_.find("target_session_attrs=read-write"), std::string::npos) << ha.out;
    const CommandResult migrated = RunCommand({LobbyBinary(), "--db", conninfo_, "migrate"});
    ASSERT_EQ(migrated.exit_code, 0) << migrated.out;
    for (auto& lobby : lobbies_) {
      lobby = LobbyProcess::Start(conninfo_);
      ASSERT_NE(lobby, nullptr);
    }
    outbox_ = dir_.Sub("outbox");
    node_metrics_port_ = FreeLoopbackPort();
    node_ = ChildProcess::Start(NodeArgs(/*simulate=*/true), {}, dir_.Sub("node.log"));
    ASSERT_NE(node_, nullptr);
  }

  std::vector<std::string> NodeArgs(bool simulate) {
    const std::string lobbies = "http://127.0.0.1:" + std::to_string(lobbies_[0]->port()) +
                                ",http://127.0.0.1:" + std::to_string(lobbies_[1]->port());
    std::vector<std::string> args = FaultNodeCommand(NodeBinary(), outbox_, lobbies,
                                                     node_metrics_port_, dir_.Sub("stored.log"));
    if (simulate) {
      args.insert(args.end(),
                  {"--admin-token", "admin-token", "--simulate-rooms", std::to_string(kRooms),
                   "--simulate-rate", std::to_string(kRoomsPerSecond), "--simulate-battle-ms",
                   std::to_string(kBattleMs), "--simulate-first-room", "10000000"});
    } else {
      args.push_back("--exit-when-drained");
    }
    return args;
  }

  // Receipts on whichever server takes writes now (-1 if none answers).
  int64_t Receipts() {
    try {
      pqxx::connection conn(conninfo_);
      return pqxx::nontransaction(conn)
          .exec1("SELECT count(*) FROM settlement_receipts")[0]
          .as<int64_t>();
    } catch (const std::exception&) {
      return -1;
    }
  }

  // Waits (up to `limit`) until the primary holds at least `count` receipts.
  bool WaitForReceipts(int64_t count, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Receipts() < count) {
      if (Clock::now() > deadline) return false;
      Sleep(100ms);
    }
    return true;
  }

  // Results settled per second over the next 5 s.
  double SettleRate() {
    const int64_t before = Receipts();
    Sleep(5s);
    return (Receipts() - before) / 5.0;
  }

  // Kills the primary node and follows the lobbies through the failover: /readyz must answer
  // 503 while no primary takes writes, and 200 again once the standby has been promoted.
  // Records what it saw in `outage` (but the rates before and after).
  void KillPrimaryAndFailOver(Outage& outage) {
    const int64_t receipts_at_kill = Receipts();
    const CommandResult killed = Ha({"kill-node", ha_dir_, "node1"});
    EXPECT_EQ(killed.exit_code, 0) << killed.out;
    const auto kill_time = Clock::now();
    if (async_) Ha({"resume-replication", ha_dir_});  // the standby may now be promoted
    std::optional<Clock::time_point> first_503;
    const auto deadline = kill_time + 120s;
    for (;;) {
      const HttpResponse ready = HttpCall(lobbies_[0]->port(), "GET", "/readyz", {}, "", 2s);
      if (ready.status == 503 && !first_503) {
        first_503 = Clock::now();
        outage.retry_after = ready.headers.count("retry-after") > 0;
      }
      if (ready.status == 200 && first_503) break;
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "the lobby was not ready again within 120 s of the kill";
        return;
      }
      Sleep(100ms);
    }
    const auto ready_again = Clock::now();
    outage.readyz_503_s = std::chrono::duration<double>(ready_again - *first_503).count();
    const double seconds = std::chrono::duration<double>(ready_again - kill_time).count();
    outage.settled_during = (Receipts() - receipts_at_kill) / seconds;
    const CommandResult primary = Ha({"primary", ha_dir_});
    EXPECT_EQ(primary.out, "node2\n") << "the standby was not promoted";
    // The second lobby finds the new primary on its own next try: wait for that, not a moment.
    EXPECT_TRUE(WaitUntil(
        [&] { return HttpCall(lobbies_[1]->port(), "GET", "/readyz", {}, "", 2s).status == 200; },
        60s))
        << "the second lobby was not ready on the new primary within 60 s";
  }

  // Lets the simulation finish, drains the outbox with a clean node, reconciles and checks.
  InvariantReport DrainReconcileAndCheck(int* reconcile_exit) {
    const auto deadline = Clock::now() + 180s;
    while (LineCount(dir_.Sub("stored.log")) < static_cast<size_t>(kRooms) &&
           Clock::now() < deadline) {
      Sleep(200ms);
    }
    EXPECT_EQ(LineCount(dir_.Sub("stored.log")), static_cast<size_t>(kRooms))
        << "the simulation did not finish";
    node_->Kill();
    node_ = ChildProcess::Start(NodeArgs(/*simulate=*/false), {}, dir_.Sub("node.log"));
    EXPECT_TRUE(node_->WaitFor(120s)) << "the outbox did not drain";
    node_.reset();
    const CommandResult listing = RunCommand(
        {NodeBinary(), "outbox", "--outbox", outbox_, "ls", "--json", "--limit", "10000000"});
    v1::OutboxListing parsed;
    EXPECT_TRUE(ParseListing(listing.out, &parsed)) << listing.out;
    std::ofstream(dir_.Sub("listing.json")) << listing.out;
    const CommandResult reconcile =
        RunCommand({LobbyBinary(), "--db", conninfo_, "reconcile", "--older-than", "0", "--outbox",
                    "node-a=" + dir_.Sub("listing.json")});
    std::printf("reconcile: %s\n", LastLine(reconcile.out).c_str());
    *reconcile_exit = reconcile.exit_code;
    return CheckInvariants(conninfo_, parsed, ReadStoredLog(dir_.Sub("stored.log")), 0);
  }

  std::string Q(const std::string& sql) {
    pqxx::connection conn(conninfo_);
    return pqxx::nontransaction(conn).exec1(sql)[0].c_str();
  }

  TempDir dir_;
  std::string ha_dir_;
  std::string conninfo_;
  std::string outbox_;
  std::unique_ptr<LobbyProcess> lobbies_[2];
  std::unique_ptr<ChildProcess> node_;
  uint16_t node_metrics_port_ = 0;
  bool async_ = false;
};

TEST_F(FailoverSuite, SynchronousStandbyLosesNothingWhenThePrimaryDies) {
  Start(/*async=*/false);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitForReceipts(kRooms / 4, 120s)) << "the load did not get going";
  Outage outage;
  outage.settled_before = SettleRate();
  // The standby confirms every commit at the moment of the kill.
  EXPECT_EQ(Q("SELECT string_agg(sync_state, ',') FROM pg_stat_replication"), "quorum");
  KillPrimaryAndFailOver(outage);
  outage.settled_after = SettleRate();
  double unavailable = 0;  // settlements the lobbies answered UNAVAILABLE
  for (const auto& lobby : lobbies_) {
    unavailable +=
        MetricSum(lobby->port(), "verdict_lobby_settlements_total{code=\"UNAVAILABLE\"}");
  }
  const double retries = MetricSum(node_metrics_port_, "verdict_node_delivery_retries_total{");
  int reconcile_exit = -1;
  const InvariantReport report = DrainReconcileAndCheck(&reconcile_exit);
  std::printf(
      "failover, synchronous standby: %s; %.0f settlements answered UNAVAILABLE, %.0f "
      "delivery retries\n  %s\n",
      outage.Summary().c_str(), unavailable, retries, report.Summary().c_str());
  for (const auto& v : report.violations) ADD_FAILURE() << v;
  EXPECT_EQ(reconcile_exit, 0) << "reconcile found rooms lost";
  EXPECT_TRUE(outage.retry_after) << "the 503 carried no Retry-After";
  EXPECT_EQ(report.settled, static_cast<uint64_t>(kRooms));
  EXPECT_EQ(report.dead_lettered, 0u);
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0");
}

// Negative control: an asynchronous standby, its replication paused before the kill. Results
// answered 2xx by the old primary meanwhile are gone after the promotion, and the checks say so.
TEST_F(FailoverSuite, NegativeControlAsynchronousStandbyLosesResults) {
  async_ = true;
  Start(/*async=*/true);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitForReceipts(kRooms / 4, 120s)) << "the load did not get going";
  const CommandResult paused = Ha({"pause-replication", ha_dir_});
  ASSERT_EQ(paused.exit_code, 0) << paused.out;
  // Results answered 2xx while nothing reaches the standby.
  const int64_t at_pause = Receipts();
  ASSERT_TRUE(WaitForReceipts(at_pause + 200, 60s)) << "nothing settled after the pause";
  Outage outage;
  KillPrimaryAndFailOver(outage);
  int reconcile_exit = -1;
  const InvariantReport report = DrainReconcileAndCheck(&reconcile_exit);
  size_t lost = 0;
  for (const auto& v : report.violations) lost += v.rfind("P1:", 0) == 0;
  std::printf(
      "failover, asynchronous standby paused: %.1f s of /readyz 503; %zu results "
      "answered 2xx by the old primary are absent on the new one\n  %s\n",
      outage.readyz_503_s, lost, report.Summary().c_str());
  EXPECT_TRUE(report.Violates("P1")) << "results lost with the old primary went unnoticed";
  EXPECT_EQ(reconcile_exit, 3) << "reconcile did not report the lost rooms";
}

}  // namespace
}  // namespace verdict::testing
