// The fault suite: a private PostgreSQL, a lobby and a verdict-node playing simulated battles,
// attacked the way production will be — the node SIGKILLed at each failpoint and at random
// moments, the lobby killed after a commit and before its reply, PostgreSQL crashed and
// restarted under load, the outbox's file system filled and freed (as root, on a small tmpfs),
// corrupt records written into the outbox — and then drained and held to verdict's promises by
// the invariant checker (invariants.h).
//
// `fault_test` runs the short form (seconds; ./scripts/test runs it). `fault_test --long` runs
// cycles of the same faults for minutes (VERDICT_FAULT_CYCLES, default 12: over 100 kills) and
// prints the figures tests/fault/RESULTS.md records.
//
// The negative controls turn one protection off each and show that the same checker reports the
// damage: the checker against hand-made violations, and whole runs with the node acking before
// sending (the deliver.* kill points), dropping batches it could not write (the writer.* kill
// points and the full disk), and the lobby releasing players before its commit (the lobby kill
// point and the PostgreSQL crash).
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <rocksdb/db.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <random>
#include <thread>

#include "tests/fault/invariants.h"
#include "tests/support/private_postgres.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace verdict::testing {
namespace {

bool g_long = false;
using namespace std::chrono_literals;

void Sleep(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

// Protections a run turns off (negative controls).
struct Unsafe {
  bool ack_before_send = false;        // node: delete before the lobby answered
  bool drop_failed_batches = false;    // node: drop what the outbox could not write
  bool release_before_commit = false;  // lobby: free the players before the settlement commits
  bool skip_settle_guard = false;      // lobby: no lock, no receipt check (and no unique keys)
};

struct Tally {
  int kills = 0;  // node SIGKILLs, at failpoints and at random
  int failpoint_kills = 0;
  int lobby_kills = 0;
  int database_crashes = 0;
  int disk_full = 0;
  uint64_t corrupt_written = 0;
  std::string Summary() const {
    return std::to_string(kills) + " node kills (" + std::to_string(failpoint_kills) +
           " at failpoints), " + std::to_string(lobby_kills) + " lobby kills after commit, " +
           std::to_string(database_crashes) + " PostgreSQL crashes, " + std::to_string(disk_full) +
           " full disks, " + std::to_string(corrupt_written) + " corrupt records";
  }
};

class FaultSuite : public ::testing::Test {
 protected:
  void SetUp() override {
    pg_ = PrivatePostgres::Start();
    if (!pg_) GTEST_SKIP() << "cannot run a private PostgreSQL here";
    {
      pqxx::connection admin(pg_->conninfo());
      pqxx::nontransaction(admin).exec("CREATE DATABASE verdict");
    }
    conninfo_ = pg_->conninfo("verdict");
    ASSERT_EQ(RunCommand({LobbyBinary(), "--db", conninfo_, "migrate"}).exit_code, 0);
    lobby_port_ = FreeLoopbackPort();
    outbox_ = dir_.Sub("outbox");
    std::filesystem::create_directories(outbox_);
    // A small file system of its own for the outbox, so it can be filled (root only).
    if (::geteuid() == 0 && ::mount("tmpfs", outbox_.c_str(), "tmpfs", 0, "size=96m") == 0) {
      mounted_ = true;
    }
  }

  void TearDown() override {
    node_.reset();
    lobby_.reset();
    if (mounted_) ::umount2(outbox_.c_str(), MNT_DETACH);
  }

  void StartLobby(const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> args;
    if (unsafe_.release_before_commit) args.push_back("--unsafe-release-before-commit");
    if (unsafe_.skip_settle_guard) args.push_back("--unsafe-skip-settle-guard");
    for (int attempt = 0; attempt < 50 && !lobby_; ++attempt) {
      lobby_ =
          LobbyProcess::Start(conninfo_, args, env, "127.0.0.1:" + std::to_string(lobby_port_));
      if (!lobby_) Sleep(100ms);  // the port may linger for a moment after a kill
    }
    ASSERT_NE(lobby_, nullptr);
  }

  std::vector<std::string> NodeArgs(bool simulate) {
    std::vector<std::string> args = {NodeBinary(),
                                     "--log-level",
                                     "warn",
                                     "run",
                                     "--node-id",
                                     "node-a",
                                     "--token",
                                     "token-a",
                                     "--outbox",
                                     outbox_,
                                     "--shards",
                                     "4",
                                     "--lobby",
                                     "http://127.0.0.1:" + std::to_string(lobby_port_),
                                     "--stored-log",
                                     dir_.Sub("stored.log"),
                                     "--progress-ms",
                                     "60000",
                                     "--outbox-no-preallocate"};
    if (simulate) {
      ++runs_;
      const std::vector<std::string> sim = {
          "--admin-token", "admin-token", "--simulate-rooms", "1000000", "--simulate-rate", "60",
          "--simulate-battle-ms", "150",
          // Fresh rooms and players each run: players of battles cut short stay in battle.
          "--simulate-first-room", std::to_string(runs_ * 10'000'000), "--simulate-first-player",
          std::to_string(runs_ * 10'000 + 1)};
      args.insert(args.end(), sim.begin(), sim.end());
    } else {
      args.push_back("--exit-when-drained");
    }
    if (unsafe_.ack_before_send) args.push_back("--unsafe-ack-before-send");
    if (unsafe_.drop_failed_batches) args.push_back("--unsafe-drop-failed-batches");
    return args;
  }

  void StartNode(const std::string& failpoints = "") {
    std::map<std::string, std::string> env;
    if (!failpoints.empty()) env["VERDICT_FAILPOINTS"] = failpoints;
    node_ = ChildProcess::Start(NodeArgs(true), env, dir_.Sub("node.log"));
    ASSERT_NE(node_, nullptr);
  }

  void KillNode() {
    if (node_ && node_->Running()) {
      node_->Kill();
      ++tally_.kills;
    }
    node_.reset();
  }

  // The node crashes itself at `failpoint` (armed for one hit); if the point is not reached in
  // time the node is killed anyway.
  void CrashNodeAt(const std::string& failpoint) {
    StartNode(failpoint + "=crash*1");
    if (node_->WaitFor(8s) && node_->killed_by_signal()) {
      ++tally_.kills;
      ++tally_.failpoint_kills;
      node_.reset();
    } else {
      KillNode();
    }
  }

  void RandomKill(std::mt19937& rng) {
    StartNode();
    Sleep(std::chrono::milliseconds(std::uniform_int_distribution<int>(200, 1500)(rng)));
    KillNode();
  }

  // The lobby dies after committing a settlement and before answering it; a new one replaces it.
  void KillLobbyAfterCommit() {
    StartNode();
    lobby_.reset();
    StartLobby({{"VERDICT_FAILPOINTS", "settle.after_commit_before_reply=crash*1"}});
    for (int i = 0; i < 100 && lobby_->Running(); ++i) Sleep(100ms);
    if (!lobby_->Running()) ++tally_.lobby_kills;
    lobby_.reset();
    StartLobby();
    Sleep(500ms);
    KillNode();
  }

  void CrashDatabase() {
    StartNode();
    Sleep(700ms);
    ASSERT_TRUE(pg_->Stop(/*immediate=*/true));
    ++tally_.database_crashes;
    Sleep(1500ms);
    ASSERT_TRUE(pg_->Restart());
    Sleep(1000ms);
    KillNode();
  }

  void FillDisk() {
    if (!mounted_) return;
    constexpr const char* kStalled = "holding the results and retrying";  // the writer's warning
    const size_t stalls_before = NodeLogCount(kStalled);
    StartNode();
    Sleep(500ms);
    const std::string filler = outbox_ + "/filler";
    {
      std::ofstream out(filler, std::ios::binary);
      const std::string chunk(1 << 20, 'x');
      while (out.write(chunk.data(), chunk.size()) && out.flush()) {
      }
    }
    ++tally_.disk_full;
    // Writes fail and finishing rooms wait (P6): hold the disk full until the node has seen a
    // write fail (or 15 s), and a little longer, however slow the machine is today.
    for (int i = 0; i < 150 && NodeLogCount(kStalled) == stalls_before; ++i) Sleep(100ms);
    Sleep(1000ms);
    std::filesystem::remove(filler);
    Sleep(1500ms);
    KillNode();
  }

  // How many lines of the node's log (all its runs so far) contain `text`.
  size_t NodeLogCount(const std::string& text) {
    std::ifstream log(dir_.Sub("node.log"));
    size_t n = 0;
    for (std::string line; std::getline(log, line);) n += line.find(text) != std::string::npos;
    return n;
  }

  // Garbage values under fresh keys in the shards, as a bad disk or a foreign writer might
  // leave them; the node must quarantine them as undecodable and go on.
  void WriteCorruptRecords(int count) {
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), outbox_, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const auto& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), outbox_, descriptors, &handles, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::WriteOptions sync;
    sync.sync = true;
    int written = 0;
    for (size_t i = 0; i < names.size() && written < count; ++i) {
      if (names[i].rfind("shard-", 0) != 0) continue;
      std::string key(8, '\0');
      const uint64_t sequence = (uint64_t{1} << 40) + ++corrupt_sequence_;
      for (int b = 0; b < 8; ++b) key[b] = static_cast<char>(sequence >> (56 - 8 * b));
      ASSERT_TRUE(db->Put(sync, handles[i], key, "\xff\x01 not an envelope").ok());
      ++written;
    }
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    tally_.corrupt_written += written;
  }

  // One round of every fault.
  void Cycle(std::mt19937& rng) {
    for (const char* point : {"writer.before_sync", "writer.after_sync", "deliver.mid_send",
                              "deliver.after_2xx_before_ack"}) {
      CrashNodeAt(point);
      RandomKill(rng);
    }
    KillLobbyAfterCommit();
    CrashDatabase();
    FillDisk();
    WriteCorruptRecords(2);
  }

  // Stops the faults, lets a clean node drain everything, and checks.
  InvariantReport DrainAndCheck() {
    node_ = ChildProcess::Start(NodeArgs(false), {}, dir_.Sub("node.log"));
    EXPECT_TRUE(node_->WaitFor(120s)) << "the outbox did not drain";
    node_.reset();
    const CommandResult listing = RunCommand(
        {NodeBinary(), "outbox", "--outbox", outbox_, "ls", "--json", "--limit", "10000000"});
    v1::OutboxListing parsed;
    EXPECT_TRUE(ParseListing(listing.out, &parsed)) << listing.out;
    return CheckInvariants(conninfo_, parsed, ReadStoredLog(dir_.Sub("stored.log")),
                           tally_.corrupt_written);
  }

  TempDir dir_;
  std::unique_ptr<PrivatePostgres> pg_;
  std::string conninfo_;
  uint16_t lobby_port_ = 0;
  std::string outbox_;
  bool mounted_ = false;
  std::unique_ptr<LobbyProcess> lobby_;
  std::unique_ptr<ChildProcess> node_;
  Unsafe unsafe_;
  Tally tally_;
  int runs_ = 0;
  uint64_t corrupt_sequence_ = 0;
};

TEST_F(FaultSuite, NothingLostNothingTwiceUnderEveryFault) {
  StartLobby();
  std::mt19937 rng(g_long ? std::random_device{}() : 7);
  const char* env_cycles = std::getenv("VERDICT_FAULT_CYCLES");
  const int cycles = g_long ? (env_cycles ? std::atoi(env_cycles) : 12) : 1;
  const auto started = std::chrono::steady_clock::now();
  for (int c = 0; c < cycles; ++c) {
    Cycle(rng);
    if (g_long) std::fprintf(stderr, "cycle %d/%d: %s\n", c + 1, cycles, tally_.Summary().c_str());
  }
  const InvariantReport report = DrainAndCheck();
  // Evidence that the faults bit: the node held results while its writes failed.
  int stalls = 0;
  std::ifstream log(dir_.Sub("node.log"));
  for (std::string line; std::getline(log, line);) {
    stalls += line.find("holding the results and retrying") != std::string::npos;
  }
  const double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() / 60;
  std::printf("fault suite (%s, %.1f min): %s; %d outbox stalls\n  %s\n", g_long ? "long" : "short",
              minutes, tally_.Summary().c_str(), stalls, report.Summary().c_str());
  for (const auto& v : report.violations) ADD_FAILURE() << v;
  EXPECT_GE(tally_.failpoint_kills, 4 * cycles - 1) << "failpoints were not reached";
  EXPECT_GT(report.settled, 0u);
  EXPECT_GT(report.stored, 0u);
  if (mounted_) {
    EXPECT_EQ(tally_.disk_full, cycles);
    EXPECT_GT(stalls, 0) << "the full disk never made a write fail";
  }
}

// Negative control for the deliver.* kill points: a node that acks before sending, killed
// mid-send, loses what it acked, and the checker says so.
TEST_F(FaultSuite, NegativeControlAckBeforeSendIsCaught) {
  unsafe_.ack_before_send = true;
  StartLobby();
  std::mt19937 rng(11);
  for (int i = 0; i < 3; ++i) {
    CrashNodeAt("deliver.mid_send");
    RandomKill(rng);
  }
  const InvariantReport report = DrainAndCheck();
  std::printf("ack before send: %s\n", report.Summary().c_str());
  EXPECT_TRUE(report.Violates("P1")) << "results lost by acking early went unnoticed";
}

// Negative control for the full disk and the writer.* kill points: a node that drops the
// batches it could not write still reports them stored, and the checker finds them nowhere.
TEST_F(FaultSuite, NegativeControlDroppingUnwritableBatchesIsCaught) {
  if (!mounted_) GTEST_SKIP() << "needs root to mount a small file system to fill";
  unsafe_.drop_failed_batches = true;
  StartLobby();
  FillDisk();
  const InvariantReport report = DrainAndCheck();
  std::printf("drop unwritable batches: %s\n", report.Summary().c_str());
  EXPECT_TRUE(report.Violates("P1")) << "results dropped on a full disk went unnoticed";
}

// Negative control for the lobby kill point: without the settlement guard (and the unique keys
// behind it) a result redelivered after the lobby died between commit and reply is no longer
// answered as a duplicate: it is refused (the room is gone) and dead-lettered although it was
// settled, or, racing, settled twice. The checker reports either.
TEST_F(FaultSuite, NegativeControlSettlingWithoutTheGuardIsCaught) {
  unsafe_.skip_settle_guard = true;
  {
    pqxx::connection conn(conninfo_);
    pqxx::work tx(conn);
    tx.exec(
        "ALTER TABLE settlement_receipts DROP CONSTRAINT settlement_receipts_pkey;"
        "ALTER TABLE matches DROP CONSTRAINT matches_room_id_key;"
        "ALTER TABLE settlement_events DROP CONSTRAINT settlement_events_room_id_key;"
        "ALTER TABLE replays DROP CONSTRAINT replays_room_id_key;");
    tx.commit();
  }
  StartLobby();
  for (int i = 0; i < 3; ++i) KillLobbyAfterCommit();
  const InvariantReport report = DrainAndCheck();
  std::printf("settling without the guard: %s\n", report.Summary().c_str());
  EXPECT_TRUE(report.Violates("P2")) << "rooms settled twice went unnoticed";
}

// Negative control for the database crash: a lobby that releases the
// players before its settlement commits leaves players free in rooms that are still active.
TEST_F(FaultSuite, NegativeControlReleaseBeforeCommitIsCaught) {
  unsafe_.release_before_commit = true;
  StartLobby();
  lobby_.reset();
  // Every settlement fails before its commit: the release (done first) is all that sticks.
  StartLobby({{"VERDICT_FAILPOINTS", "settle.before_commit=error"}});
  StartNode();
  Sleep(2500ms);
  KillNode();
  lobby_.reset();
  StartLobby();
  v1::OutboxListing none;
  const InvariantReport report =
      CheckInvariants(conninfo_, none, ReadStoredLog(dir_.Sub("stored.log")), 0);
  EXPECT_TRUE(report.Violates("P5")) << "players released before the commit went unnoticed";
}

}  // namespace
}  // namespace verdict::testing

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--long") {
      verdict::testing::g_long = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int count = static_cast<int>(args.size());
  ::testing::InitGoogleTest(&count, args.data());
  return RUN_ALL_TESTS();
}
