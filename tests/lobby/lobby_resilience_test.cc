// The lobby when the database misbehaves or clients give up, against a real PostgreSQL: a
// stuck room holds one DB worker and no other room waits; lock and statement timeouts answer
// 503; a client that hangs up frees its worker; a backend killed mid-settlement, or a connection
// lost after COMMIT, is answered truthfully from the receipt (once a synchronous standby has it);
// a read-only database is not ready and answers 503; tokens rotate without a 401, and a reload
// that would confuse them is refused; a SIGHUP that comes while the loader runs the initialisers
// waits for the lobby; readiness costs the settlements nothing and fails on a full data disk.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/lobby/lobby_fixture.h"
#include "tests/support/private_postgres.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;
using LobbyResilienceTest = LobbyFixture;

// Lobby backends of this test's database now waiting for a lock inside verdict_settle.
std::string SettlementsWaitingForALock(const std::function<std::string(std::string)>& q) {
  return q(
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
      "wait_event_type = 'Lock' AND query LIKE '%FROM verdict_settle_prepare(%'");
}

// Waits up to 10 s for `condition`.
bool WaitFor(const std::function<bool()>& condition) {
  for (int i = 0; i < 200; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// Whether SIGHUP waits in `pid`'s process-wide pending set (not yet taken by its sigwait).
bool SighupPending(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("ShdPnd:", 0) == 0) {
      return (std::stoull(line.substr(7), nullptr, 16) >> (SIGHUP - 1)) & 1;
    }
  }
  return false;
}

// Waits until the lobby has handled every SIGHUP sent to it so far. Its signal thread takes one
// SIGHUP at a time and reloads before it takes the next, so once a second SIGHUP, sent after the
// first was taken, has been taken too, the first reload has finished.
bool SighupsHandled(pid_t pid) {
  if (!WaitFor([&] { return !SighupPending(pid); })) return false;
  ::kill(pid, SIGHUP);
  return WaitFor([&] { return !SighupPending(pid); });
}

// Holds a room's advisory lock from a session of its own, as a stuck transaction would.
class RoomLock {
 public:
  RoomLock(const TestDatabase& db, uint64_t room) : conn_(db.Connect()) {
    pqxx::nontransaction(*conn_).exec("SELECT pg_advisory_lock(" + std::to_string(room) + ")");
  }
  void Release() { conn_.reset(); }

 private:
  std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(LobbyResilienceTest, StuckRoomHoldsOneWorkerAndOtherRoomsKeepSettling) {
  // A long lock timeout, so that only the per-room turns keep the workers free.
  auto lobby = StartLobby({"--lock-timeout-ms", "60000"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 81);
  MustAllocate(lobby->port(), 82);
  RoomLock stuck(*db_, 81);

  std::vector<std::thread> attempts;
  for (int i = 0; i < 20; ++i) {
    attempts.emplace_back([&] {
      // Each client gives up after 3 s, as a node's attempt timeout would.
      HttpCall(lobby->port(), "POST", "/v1/settlements", JsonHeaders("token-a"),
               wire::EncodeBody(MakeResult(81), wire::BodyFormat::kJson).value(), 3s);
    });
  }
  auto q = [this](const std::string& sql) { return Q(sql); };
  ASSERT_TRUE(WaitFor([&] { return SettlementsWaitingForALock(q) == "1"; }));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(SettlementsWaitingForALock(q), "1") << "two attempts at one room hold two workers";
    std::this_thread::sleep_for(100ms);
  }
  // The lobby has four DB workers and twenty attempts at room 81: room 82 settles anyway,
  // while 81 is still stuck.
  const HttpResponse other = Settle(lobby->port(), MakeResult(82));
  EXPECT_EQ(other.status, 200) << other.body << other.error;
  EXPECT_EQ(SettlementsWaitingForALock(q), "1") << "room 81 was released before 82 settled";
  for (auto& t : attempts) t.join();

  stuck.Release();
  const HttpResponse late = Settle(lobby->port(), MakeResult(81));
  ASSERT_EQ(late.status, 200) << late.body;
  EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE room_id = 81"), "1");
}

// A settlement's rating step that never ends (a glicko2 mode declared with tau 1e-30 spun for
// ever in step 5, issue 49): the failpoint hangs the worker inside the open transaction, after it
// locked the room and its players. No statement runs, so no statement timeout fires; the
// server's idle-in-transaction timeout (the statement timeout, here 2 s) ends the session and
// frees the locks. And SIGTERM still ends the lobby, whose worker never returns: it exits with
// status 1 once the shutdown's grace has passed.
TEST_F(LobbyResilienceTest, AStuckRatingStepFreesItsLocksAndSigtermStillEndsTheLobby) {
  auto lobby = StartLobby({"--statement-timeout-ms", "2000"},
                          {{"VERDICT_FAILPOINTS", "settle.rate=hang*1"}});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 84);
  std::thread stuck([&] {
    HttpCall(lobby->port(), "POST", "/v1/settlements", JsonHeaders("token-a"),
             wire::EncodeBody(MakeResult(84), wire::BodyFormat::kJson).value(), 2s);
  });
  // The settlement took the room's advisory lock and its players' rows, then hung.
  ASSERT_TRUE(WaitFor([&] {
    return Q("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 84") == "1";
  })) << "the settlement never took the room's lock";
  // Then the server ends the idle transaction: nothing holds the room or its players any more.
  const auto lockable = [&] {
    try {
      auto conn = db_->Connect();
      pqxx::work tx(*conn);
      tx.exec("SET lock_timeout = 1");
      const bool room = tx.exec1("SELECT pg_try_advisory_xact_lock(84)")[0].as<bool>();
      tx.exec("SELECT 1 FROM players WHERE player_id IN ('841', '846') FOR UPDATE NOWAIT");
      return room;
    } catch (const std::exception&) {
      return false;
    }
  };
  EXPECT_TRUE(WaitUntil(lockable, 20s)) << "the stuck settlement still holds its locks";
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "0") << "nothing was committed";
  stuck.join();

  ::kill(lobby->pid(), SIGTERM);
  const bool exited = WaitUntil([&] { return !lobby->Running(); }, 60s);
  EXPECT_TRUE(exited) << "SIGTERM did not end a lobby whose worker is stuck";
  if (!exited) lobby->Kill();
}

TEST_F(LobbyResilienceTest, LockTimeoutAnswers503WithRetryAfterAndChangesNothing) {
  auto lobby = StartLobby({"--lock-timeout-ms", "300"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 83);
  RoomLock stuck(*db_, 83);
  const DbSnapshot before = Snapshot();
  const HttpResponse r = Settle(lobby->port(), MakeResult(83));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.headers.count("retry-after") ? r.headers.at("retry-after") : "", "1");
  EXPECT_NE(r.body.find("\"retryable\":true"), std::string::npos) << r.body;
  EXPECT_EQ(Snapshot(), before);
  stuck.Release();
  EXPECT_EQ(Settle(lobby->port(), MakeResult(83)).status, 200);
}

TEST_F(LobbyResilienceTest, StatementTimeoutAnswers503) {
  auto lobby = StartLobby({"--statement-timeout-ms", "300", "--lock-timeout-ms", "0"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 87);
  RoomLock stuck(*db_, 87);
  const HttpResponse r = Settle(lobby->port(), MakeResult(87));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "0");
}

// One DB worker, a room stuck for a minute, and a client that gives up after a second: only if
// the lobby cancels the abandoned attempt can another room settle on that one worker.
TEST_F(LobbyResilienceTest, ClientThatHangsUpIsCancelledAndFreesItsWorker) {
  auto lobby =
      StartLobby({"--db-pool", "1", "--lock-timeout-ms", "60000", "--statement-timeout-ms", "0"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 84);
  MustAllocate(lobby->port(), 85);
  RoomLock stuck(*db_, 84);
  auto q = [this](const std::string& sql) { return Q(sql); };
  const HttpResponse gave_up =
      HttpCall(lobby->port(), "POST", "/v1/settlements", JsonHeaders("token-a"),
               wire::EncodeBody(MakeResult(84), wire::BodyFormat::kJson).value(), 1s);
  EXPECT_EQ(gave_up.status, 0) << "the stuck room answered";
  EXPECT_TRUE(WaitFor([&] { return SettlementsWaitingForALock(q) == "0"; }))
      << "the abandoned attempt still waits for the room's lock";
  const HttpResponse other =
      HttpCall(lobby->port(), "POST", "/v1/settlements", JsonHeaders("token-a"),
               wire::EncodeBody(MakeResult(85), wire::BodyFormat::kJson).value(), 10s);
  EXPECT_EQ(other.status, 200) << other.body << other.error;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts WHERE room_id = 84"), "0");
}

// The parent of `pid` (from /proc; 0 if unreadable): a backend's parent is the postmaster.
pid_t ParentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return 0;
  std::istringstream fields(text.substr(after_name + 1));
  std::string state;
  pid_t parent = 0;
  fields >> state >> parent;
  return parent;
}

// A client hangs up while its settlement waits on the database, and the cancel cannot get an
// answer from the server: the postmaster, which takes cancel requests, is stopped (SIGSTOP), so
// libpq's cancel connects and then waits. With a single I/O thread, the lobby must go on
// answering; once the postmaster resumes, the abandoned attempt ends and the room settles.
TEST(LobbyCancelTest, ACancelTheServerDoesNotAnswerHoldsNoIoThread) {
  auto pg = PrivatePostgres::Start();
  ASSERT_NE(pg, nullptr);
  const std::string conninfo = pg->conninfo();
  ASSERT_EQ(RunCommand({LobbyBinary(), "--db", conninfo, "migrate"}).exit_code, 0);
  auto lobby = LobbyProcess::Start(
      conninfo, {"--threads", "1", "--lock-timeout-ms", "60000", "--statement-timeout-ms", "0"});
  ASSERT_NE(lobby, nullptr);
  const v1::RoomAllocation allocation = MakeAllocation(93, "node-a", 931, 10);
  ASSERT_EQ(HttpCall(lobby->port(), "POST", "/v1/rooms", LobbyFixture::JsonHeaders("admin-token"),
                     wire::EncodeBody(allocation, wire::BodyFormat::kJson).value())
                .status,
            201);
  auto admin = std::make_unique<pqxx::connection>(conninfo);
  auto q = [&](const std::string& sql) {
    pqxx::nontransaction tx(*admin);
    pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string() : std::string(r[0][0].c_str());
  };
  auto holder = std::make_unique<pqxx::connection>(conninfo);
  pqxx::nontransaction(*holder).exec("SELECT pg_advisory_lock(93)");
  const pid_t postmaster = ParentOf(std::stoi(q("SELECT pg_backend_pid()")));
  ASSERT_GT(postmaster, 1);

  std::thread gave_up([&] {
    HttpCall(lobby->port(), "POST", "/v1/settlements", LobbyFixture::JsonHeaders("token-a"),
             wire::EncodeBody(MakeResult(93), wire::BodyFormat::kJson).value(), 2s);
  });
  ASSERT_TRUE(WaitFor([&] { return SettlementsWaitingForALock(q) == "1"; }));
  ASSERT_EQ(::kill(postmaster, SIGSTOP), 0);
  gave_up.join();  // the hang-up: the lobby now tries to cancel the waiting statement
  std::vector<int> statuses;
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(250ms);
    statuses.push_back(HttpCall(lobby->port(), "GET", "/healthz", {}, "", 3s).status);
  }
  ::kill(postmaster, SIGCONT);
  EXPECT_EQ(statuses, std::vector<int>(4, 200)) << "the lobby stopped answering while a cancel "
                                                   "waited for the database server";
  // The cancel goes through now: the abandoned attempt stops waiting for the room's lock.
  EXPECT_TRUE(WaitFor([&] { return SettlementsWaitingForALock(q) == "0"; }));
  holder.reset();
  const HttpResponse settled =
      HttpCall(lobby->port(), "POST", "/v1/settlements", LobbyFixture::JsonHeaders("token-a"),
               wire::EncodeBody(MakeResult(93), wire::BodyFormat::kJson).value(), 20s);
  EXPECT_EQ(settled.status, 200) << settled.body << settled.error;
  EXPECT_EQ(q("SELECT count(*) FROM matches WHERE room_id = 93"), "1");
}

TEST_F(LobbyResilienceTest, BackendTerminatedMidSettlementIs503ThenSettlesOnce) {
  auto lobby = StartLobby({"--lock-timeout-ms", "60000"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 86);
  RoomLock stuck(*db_, 86);
  HttpResponse killed;
  std::thread attempt([&] { killed = Settle(lobby->port(), MakeResult(86)); });
  auto q = [this](const std::string& sql) { return Q(sql); };
  ASSERT_TRUE(WaitFor([&] { return SettlementsWaitingForALock(q) == "1"; }));
  EXPECT_EQ(
      Q("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND query LIKE '%FROM verdict_settle_prepare(%' AND "
        "wait_event_type = 'Lock') t"),
      "1");
  attempt.join();
  EXPECT_EQ(killed.status, 503) << killed.body;
  EXPECT_EQ(killed.headers.count("retry-after"), 1u);
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms WHERE room_id = 86"), "1");
  stuck.Release();
  const HttpResponse retry = Settle(lobby->port(), MakeResult(86));
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_FALSE(Receipt(retry).duplicate());
  EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE room_id = 86"), "1");
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
}

// A lobby whose sessions only read (what a standby, or a primary being demoted, gives it) is not
// ready, and answers settlements 503 with Retry-After, retryable, changing nothing: never a
// final error that would make a node set a valid result aside. On a writable session again
// the same result settles.
TEST_F(LobbyResilienceTest, ReadOnlyDatabaseIsNotReadyAndSettlementsWait) {
  auto writable = StartLobby();
  ASSERT_NE(writable, nullptr);
  MustAllocate(writable->port(), 88);
  auto read_only =
      LobbyProcess::Start(db_->conninfo() + " options='-c default_transaction_read_only=on'");
  ASSERT_NE(read_only, nullptr);
  const HttpResponse ready = HttpCall(read_only->port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("only reads"), std::string::npos) << ready.body;
  EXPECT_EQ(HttpCall(writable->port(), "GET", "/readyz").status, 200);
  const DbSnapshot before = Snapshot();
  const HttpResponse refused = Settle(read_only->port(), MakeResult(88));
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.headers.count("retry-after"), 1u);
  EXPECT_NE(refused.body.find("\"retryable\":true"), std::string::npos) << refused.body;
  EXPECT_EQ(Snapshot(), before);
  const HttpResponse settled = Settle(writable->port(), MakeResult(88));
  ASSERT_EQ(settled.status, 200) << settled.body;
  EXPECT_FALSE(Receipt(settled).duplicate());
}

// A SIGHUP sent while the dynamic loader runs the shared libraries' initialisers (by a preloaded
// library's own initialiser, at the same point every run) killed the lobby: it blocked SIGHUP
// only once connected to its database. Blocked from the executable's .preinit_array
// (cli/hangup_guard.h), it waits, and reloads the tokens once the lobby serves. Timed SIGHUPs
// over a whole start: NodeProcessTest.ASighupAtAnyMomentOfTheStartAfterTheGuardWaitsForTheNode.
TEST_F(LobbyResilienceTest, ASighupDuringTheInitialisersWaitsForTheLobby) {
  TempDir dir;
  const std::string log = dir.Sub("lobby.log");
  auto lobby = LobbyProcess::Start(db_->conninfo(), {"--log-level", "info"},
                                   {{"LD_PRELOAD", VERDICT_HANGUP_AT_LOAD}}, "127.0.0.1:0",
                                   LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr) << "the lobby did not come up";
  const auto text = [&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  EXPECT_TRUE(WaitFor([&] {
    return !lobby->Running() || text().find("SIGHUP: node tokens reloaded") != std::string::npos;
  })) << text();
  ASSERT_TRUE(lobby->Running()) << text();
  const int status = lobby->Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << text();
}

// Rotating node-a's token under load: add the new token beside the old (SIGHUP), move the
// sender to it, drop the old one (SIGHUP). No request is refused, and the live event
// subscription and the lobby stay up through both reloads.
TEST_F(LobbyResilienceTest, TokenRotationUnderLoadRefusesNothing) {
  TempDir dir;
  const std::string tokens = dir.Sub("tokens");
  std::ofstream(tokens) << "node-a old-secret\n";
  auto lobby = StartLobby({"--node-tokens-file", tokens});
  ASSERT_NE(lobby, nullptr);
  constexpr uint64_t kRooms = 120;
  for (uint64_t room = 1; room <= kRooms; ++room) MustAllocate(lobby->port(), room);
  WsClient events;
  ASSERT_TRUE(events.Connect(lobby->port(), "/v1/events", "admin-token"));

  std::atomic<int> token_in_use{0};  // 0: old-secret, 1: new-secret
  std::atomic<uint64_t> next_room{1};
  std::atomic<int> refused{0}, settled{0};
  auto sender = [&] {
    for (uint64_t room; (room = next_room++) <= kRooms;) {
      const HttpResponse r =
          Settle(lobby->port(), MakeResult(room), token_in_use ? "new-secret" : "old-secret");
      (r.status == 200 ? settled : refused)++;
      std::this_thread::sleep_for(5ms);
    }
  };
  std::thread a(sender), b(sender);
  auto reload = [&](const std::string& lines) {
    std::ofstream(tokens) << lines;
    ::kill(lobby->pid(), SIGHUP);
  };
  while (next_room < kRooms / 3) std::this_thread::sleep_for(5ms);
  reload("node-a old-secret\nnode-a new-secret\n");
  ASSERT_TRUE(WaitFor([&] {
    return HttpCall(lobby->port(), "GET", "/v1/settlements/1",
                    {{"Authorization", "Bearer new-secret"}})
               .status != 401;
  })) << "SIGHUP did not load the new token";
  token_in_use = 1;
  while (next_room < 2 * kRooms / 3) std::this_thread::sleep_for(5ms);
  reload("node-a new-secret\n");
  ASSERT_TRUE(WaitFor([&] {
    return HttpCall(lobby->port(), "GET", "/v1/settlements/1",
                    {{"Authorization", "Bearer old-secret"}})
               .status == 401;
  })) << "SIGHUP did not drop the old token";
  a.join();
  b.join();

  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(settled.load(), static_cast<int>(kRooms));
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), std::to_string(kRooms));
  EXPECT_TRUE(events.Read(10s).has_value()) << "the subscription did not survive the reloads";
  // A broken tokens file is refused and the tokens in use are kept.
  reload("node-a\n");
  ASSERT_TRUE(SighupsHandled(lobby->pid())) << "the lobby did not take its SIGHUP";
  EXPECT_EQ(
      HttpCall(lobby->port(), "GET", "/v1/settlements/1", {{"Authorization", "Bearer new-secret"}})
          .status,
      200);
  EXPECT_TRUE(lobby->Running());
}

// An admin token that is also a node's token would make that node the admin (and refuse its
// settlements with 401): refused at start, and at reload, where the tokens in use stay.
TEST_F(LobbyResilienceTest, AnAdminTokenThatIsANodesTokenIsRefusedAtStartAndAtReload) {
  EXPECT_EQ(LobbyProcess::Start(db_->conninfo(), {"--node-token", "node-c=admin-token"}), nullptr)
      << "a lobby started with a node token equal to its admin token";
  TempDir dir;
  const std::string tokens = dir.Sub("tokens");
  const std::string log = dir.Sub("lobby.log");
  std::ofstream(tokens) << "node-c token-c\n";
  auto lobby = LobbyProcess::Start(db_->conninfo(), {"--node-tokens-file", tokens}, {},
                                   "127.0.0.1:0", LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr);
  std::ofstream(tokens) << "node-c admin-token\n";
  ::kill(lobby->pid(), SIGHUP);
  ASSERT_TRUE(SighupsHandled(lobby->pid())) << "the lobby did not take its SIGHUP";
  EXPECT_EQ(
      HttpCall(lobby->port(), "GET", "/v1/players/1", {{"Authorization", "Bearer token-c"}}).status,
      404)
      << "the tokens in use were dropped";
  MustAllocate(lobby->port(), 92, "node-c");  // admin-token is still the admin's alone
  EXPECT_EQ(Settle(lobby->port(), MakeResult(92, 1'700'000'000'000, "node-c"), "token-c").status,
            200);
  std::ifstream logged(log);
  const std::string lines((std::istreambuf_iterator<char>(logged)), {});
  EXPECT_NE(lines.find("admin token"), std::string::npos) << lines;
}

// A tokens file that names no token (emptied, or cut short while it was written) is refused at
// reload, with an error in the log: the tokens in use stay, and no node is refused.
TEST_F(LobbyResilienceTest, AReloadOfATokensFileThatNamesNoTokenKeepsTheTokensInUse) {
  TempDir dir;
  const std::string tokens = dir.Sub("tokens");
  const std::string log = dir.Sub("lobby.log");
  std::ofstream(tokens) << "node-c token-c\n";
  auto lobby = LobbyProcess::Start(db_->conninfo(), {"--node-tokens-file", tokens}, {},
                                   "127.0.0.1:0", LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr);
  for (const char* contents : {"", "# node_id token\n\n"}) {
    std::ofstream(tokens) << contents;
    ::kill(lobby->pid(), SIGHUP);
    ASSERT_TRUE(SighupsHandled(lobby->pid())) << "the lobby did not take its SIGHUP";
    EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/players/1", {{"Authorization", "Bearer token-c"}})
                  .status,
              404)
        << "a reload of '" << contents << "' dropped the tokens in use";
  }
  std::ifstream logged(log);
  const std::string lines((std::istreambuf_iterator<char>(logged)), {});
  EXPECT_NE(lines.find("[error] SIGHUP: cannot reload the node tokens"), std::string::npos)
      << lines;
}

// /readyz is answered from the last probe, made on a connection of the readiness monitor's own:
// with the lobby's one DB worker held by a settlement that waits for a room's lock, it answers
// at once (it used to wait behind that settlement for a worker).
TEST_F(LobbyResilienceTest, ReadinessIsAnsweredWhileEveryDbWorkerIsBusy) {
  auto lobby =
      StartLobby({"--db-pool", "1", "--lock-timeout-ms", "60000", "--statement-timeout-ms", "0"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 89);
  RoomLock stuck(*db_, 89);
  HttpResponse settled;
  std::thread settling([&] { settled = Settle(lobby->port(), MakeResult(89)); });
  auto q = [this](const std::string& sql) { return Q(sql); };
  ASSERT_TRUE(WaitFor([&] { return SettlementsWaitingForALock(q) == "1"; }));
  const HttpResponse ready = HttpCall(lobby->port(), "GET", "/readyz", {}, "", 2s);
  EXPECT_EQ(ready.status, 200) << ready.body << ready.error;
  EXPECT_EQ(SettlementsWaitingForALock(q), "1") << "the settlement stopped waiting";
  stuck.Release();
  settling.join();
  EXPECT_EQ(settled.status, 200) << settled.body;
}

// A full data disk fails settlements (53100, disk full) and makes the lobby not ready until the
// disk has room again: its readiness probe commits a write that needs a fresh page, as a
// settlement does, where a query alone would pass. The lobby's database lives in a tablespace on
// a small tmpfs, filled by the test (as root, like the fault suite's full disk).
TEST(LobbyReadinessTest, AFullDataDiskIsNotReadyUntilItHasRoomAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small file system to fill";
  const passwd* owner = ::getpwnam("postgres");
  if (owner == nullptr) GTEST_SKIP() << "needs the 'postgres' user to own the tablespace";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // the server's user goes through it
  const std::string disk = dir.Sub("disk");
  ASSERT_EQ(::mkdir(disk.c_str(), 0700), 0);
  ASSERT_EQ(::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=24m"), 0) << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{disk};
  ASSERT_EQ(::chown(disk.c_str(), owner->pw_uid, owner->pw_gid), 0);
  auto pg = PrivatePostgres::Start();
  ASSERT_NE(pg, nullptr);
  {
    pqxx::connection admin(pg->conninfo());
    pqxx::nontransaction tx(admin);
    tx.exec("CREATE TABLESPACE small LOCATION '" + disk + "'");
    tx.exec("CREATE DATABASE verdict TABLESPACE small");
  }
  const std::string conninfo = pg->conninfo("verdict");
  ASSERT_EQ(RunCommand({LobbyBinary(), "--db", conninfo, "migrate"}).exit_code, 0);
  auto lobby = LobbyProcess::Start(conninfo, {"--readiness-interval-ms", "100"});
  ASSERT_NE(lobby, nullptr);
  const auto allocate = [&](uint64_t room) {
    return HttpCall(lobby->port(), "POST", "/v1/rooms", LobbyFixture::JsonHeaders("admin-token"),
                    wire::EncodeBody(MakeAllocation(room, "node-a", room * 10 + 1, 10),
                                     wire::BodyFormat::kJson)
                        .value())
        .status;
  };
  const auto settle = [&](uint64_t room) {
    return HttpCall(lobby->port(), "POST", "/v1/settlements", LobbyFixture::JsonHeaders("token-a"),
                    wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value());
  };
  const auto ready = [&] { return HttpCall(lobby->port(), "GET", "/readyz"); };
  ASSERT_EQ(allocate(93), 201);
  ASSERT_EQ(ready().status, 200);

  const std::string filler = disk + "/filler";
  {
    std::ofstream fill(filler, std::ios::binary);
    const std::string block(1 << 16, '\0');
    while (fill.write(block.data(), block.size()) && fill.flush()) {
    }
  }
  EXPECT_TRUE(WaitFor([&] { return ready().status == 503; })) << "ready on a full disk";
  const HttpResponse not_ready = ready();
  EXPECT_NE(not_ready.body.find("53100"), std::string::npos) << not_ready.body;
  const HttpResponse refused = settle(93);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("\"retryable\":true"), std::string::npos) << refused.body;

  ASSERT_EQ(::unlink(filler.c_str()), 0);
  EXPECT_TRUE(WaitFor([&] { return ready().status == 200; })) << "not ready with room again";
  const HttpResponse settled = settle(93);
  EXPECT_EQ(settled.status, 200) << settled.body;
}

// The connection is lost after COMMIT was sent and the transaction committed: a private server
// whose commits wait for a synchronous standby that never comes, and whose waiting backend is
// then terminated (PostgreSQL has committed locally by then). The lobby must read the receipt
// back and see its own attempt, but answer only once the standby confirms the receipt (it waits
// for the standby again, and a failover before then would lose the receipt); then duplicate:
// false, and the event must still go out.
TEST(LobbyCommitUnknownTest, ConnectionLostAfterCommitIsAnsweredAsThisRequestsSettlement) {
  auto pg = PrivatePostgres::Start();
  ASSERT_NE(pg, nullptr);
  const std::string conninfo = pg->conninfo();
  ASSERT_EQ(RunCommand({LobbyBinary(), "--db", conninfo, "migrate"}).exit_code, 0);
  auto lobby = LobbyProcess::Start(conninfo);
  ASSERT_NE(lobby, nullptr);
  auto admin = std::make_unique<pqxx::connection>(conninfo);
  auto q = [&](const std::string& sql) {
    pqxx::nontransaction tx(*admin);
    pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string() : std::string(r[0][0].c_str());
  };
  const v1::RoomAllocation allocation = MakeAllocation(91, "node-a", 911, 10);
  ASSERT_EQ(HttpCall(lobby->port(), "POST", "/v1/rooms", LobbyFixture::JsonHeaders("admin-token"),
                     wire::EncodeBody(allocation, wire::BodyFormat::kJson).value())
                .status,
            201);
  WsClient events;
  ASSERT_TRUE(events.Connect(lobby->port(), "/v1/events", "token-a"));

  q("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
  q("SELECT pg_reload_conf()");
  HttpResponse answer;
  std::atomic<bool> answered{false};
  std::thread settle([&] {
    answer =
        HttpCall(lobby->port(), "POST", "/v1/settlements", LobbyFixture::JsonHeaders("token-a"),
                 wire::EncodeBody(MakeResult(91), wire::BodyFormat::kJson).value(), 60s);
    answered = true;
  });
  // The backend running `statement` while it waits for the standby ("" if none).
  const auto waiting_for_standby = [&](const std::string& statement) {
    return q("SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%" +
             statement + "%'");
  };
  // The settlement's transaction waits in its COMMIT (the last statement it sent).
  const std::string settling = WaitFor([&] { return !waiting_for_standby("COMMIT").empty(); })
                                   ? waiting_for_standby("COMMIT")
                                   : std::string();
  // Cut the waiting backend's connection: PostgreSQL finishes the local commit and sends the
  // client nothing more. The lobby reads the receipt back and waits for the standby again, on
  // another backend; only then let commits through.
  if (!settling.empty()) q("SELECT pg_terminate_backend(" + settling + ")");
  const bool confirming =
      WaitFor([&] { return !waiting_for_standby("pg_logical_emit_message").empty(); });
  const bool answered_unconfirmed = answered;
  q("ALTER SYSTEM RESET synchronous_standby_names");
  q("SELECT pg_reload_conf()");
  settle.join();
  ASSERT_FALSE(settling.empty()) << "the settlement's commit never waited for the standby";
  EXPECT_TRUE(confirming) << "the receipt read back was not confirmed by the standby";
  EXPECT_FALSE(answered_unconfirmed) << "answered before the standby had the receipt";
  ASSERT_EQ(answer.status, 200) << answer.body << answer.error;
  EXPECT_NE(answer.body.find("\"duplicate\":false"), std::string::npos) << answer.body;
  EXPECT_EQ(q("SELECT count(*) FROM matches"), "1");
  auto event = events.Read(10s);
  ASSERT_TRUE(event.has_value()) << "the settlement's event was not delivered";
  EXPECT_NE(event->find("\"room_id\": \"91\""), std::string::npos) << *event;
}

}  // namespace
}  // namespace verdict::testing
