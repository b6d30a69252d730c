// verdict-node as operators and the demo use it, against the real lobby and PostgreSQL: the
// simulator's rooms all settle exactly once; enqueue and the outbox commands; a dead-lettered
// result redriven after the cause is fixed.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>

#include "node/battle_node.h"
#include "storage/outbox.h"
#include "tests/lobby/lobby_fixture.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;

using NodeEndToEndTest = LobbyFixture;

std::vector<std::string> RunArgs(const std::string& outbox, uint16_t port) {
  return NodeRunArgs(outbox, port, {"--exit-when-drained", "--progress-ms", "500"});
}

TEST_F(NodeEndToEndTest, SimulatedRoomsEachEndWithExactlyOneReceipt) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  TempDir dir;
  auto args = RunArgs(dir.Sub("outbox"), lobby->port());
  for (const char* extra : {"--simulate-rooms", "300", "--simulate-rate", "300",
                            "--simulate-battle-ms", "300", "--admin-token", "admin-token"}) {
    args.push_back(extra);
  }
  const CommandResult run = RunCommand(args);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("rooms 300/300 finished"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("drained"), std::string::npos);

  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "300");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0") << "an allocated room has no receipt";
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "300");
  // Every settled match moved each of its ten players' game count by one; aborts by none.
  EXPECT_EQ(Q("SELECT sum(games) FROM player_ratings"),
            Q("SELECT 10 * count(*) FROM matches WHERE outcome = 'SETTLED'"));
  EXPECT_EQ(Q("SELECT coalesce(sum(rating_after - rating_before), 0) FROM match_players"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
}

// A full disk under simulated battles: the outbox cannot write, the channel fills and the
// simulator's thread blocks handing a result over. SIGTERM must still end the node within its
// shutdown deadline (30 s), saying how many results it could not store, rather than wait for
// the blocked thread before starting the shutdown that releases it.
TEST_F(NodeEndToEndTest, SigtermEndsASimulatingNodeBlockedOnAFailingOutbox) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  TempDir dir;
  const uint16_t metrics = FreeLoopbackPort();
  auto args = RunArgs(dir.Sub("outbox"), lobby->port());
  const std::vector<std::string> extra = {
      "--simulate-rooms",     "100000",
      "--simulate-rate",      "2000",
      "--simulate-battle-ms", "100",
      "--admin-token",        "admin-token",
      "--metrics-listen",     "127.0.0.1:" + std::to_string(metrics)};
  args.insert(args.end(), extra.begin(), extra.end());
  const std::string log_path = dir.Sub("node.log");
  const auto logged = [&] {
    std::ifstream log(log_path);
    return std::string((std::istreambuf_iterator<char>(log)), {});
  };
  auto node =
      ChildProcess::Start(args, {{"VERDICT_FAILPOINTS", "writer.before_sync=error"}}, log_path);
  ASSERT_NE(node, nullptr);
  // The simulator (at least) waits on the full channel. (Its player pool, three rooms' worth
  // per battle in play, holds 600 rooms: the lobby allocates nobody twice before a settlement.)
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string m = HttpCall(metrics, "GET", "/metrics", {}, "", 2s).body;
        return MetricValue(m, "verdict_node_result_channel_blocked_producers") >= 1;
      },
      60s))
      << logged();
  ASSERT_EQ(::kill(node->pid(), SIGTERM), 0);
  ASSERT_TRUE(node->WaitFor(120s)) << "no exit 120 s after SIGTERM\n" << logged();
  EXPECT_EQ(node->exit_code(), 1) << logged();
  EXPECT_NE(logged().find("could not be stored before shutdown"), std::string::npos) << logged();
}

TEST_F(NodeEndToEndTest, EnqueueFromJsonAndTheOutboxCommands) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string good = dir.Sub("good.jsonl");
  {
    std::ofstream out(good);
    for (uint64_t room : {1, 2, 3}) {
      out << wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value() << "\n";
    }
  }
  auto r = RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, good});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "3 new, 0 already present\n");
  r = RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, good});
  EXPECT_EQ(r.out, "0 new, 3 already present\n");

  const std::string bad = dir.Sub("bad.jsonl");
  std::ofstream(bad) << wire::EncodeBody(MakeResult(4), wire::BodyFormat::kJson).value()
                     << "\n{\"room_id\": \"5\", \"outcome\": \n";
  r = RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, bad});
  EXPECT_EQ(r.exit_code, 1);
  auto stats = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "stats", "--json"});
  ASSERT_EQ(stats.exit_code, 0);
  EXPECT_NE(stats.out.find("\"records\":3,"), std::string::npos)
      << "a malformed file must enqueue nothing: " << stats.out;
  EXPECT_NE(stats.out.find("{\"shard\":15,"), std::string::npos) << stats.out;

  const auto ls = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "ls", "--json"});
  EXPECT_NE(ls.out.find("\"room_id\":\"2\",\"where\":\"shard-"), std::string::npos) << ls.out;
  const auto show = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "show", "3"});
  ASSERT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("\"winner_team\":1"), std::string::npos) << show.out;
  EXPECT_EQ(RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "show", "99"}).exit_code, 1);
  EXPECT_NE(RunCommand({NodeBinary(), "outbox", "--outbox", dir.Sub("none"), "stats"}).exit_code,
            0);
}

// A text no hand-written JSON gets right: quotes, a backslash, control characters, non-ASCII.
constexpr char kAwkwardText[] =
    "a \"quoted\" C:\\path\n\ttab \x01 <tag> caf\xc3\xa9 \xf0\x9f\x8e\xb2";

template <typename Message>
Message ParseJson(const std::string& json) {
  Message message;
  std::string error;
  EXPECT_TRUE(wire::DecodeBody(json, wire::BodyFormat::kJson, &message, &error))
      << error << " in " << json;
  return message;
}

// The outbox documents (`ls`, `show`, `stats`) and the reconciliation that reads `ls` are
// protobuf messages printed as JSON: a detail of any text arrives as it was written.
TEST_F(NodeEndToEndTest, OutboxAndReconcileJsonCarryAnyTextIntact) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 81);
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("result.json");
  std::ofstream(file) << wire::EncodeBody(MakeResult(81), wire::BodyFormat::kJson).value();
  ASSERT_EQ(RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, file}).exit_code, 0);
  {
    auto opened = storage::OpenOutbox(outbox, {});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    storage::Outbox& box = **opened;
    const uint32_t shard = storage::RoomShard(81, box.shard_count());
    auto records = box.ReadShard(shard, 0, 10);
    ASSERT_TRUE(records.ok() && records->size() == 1u);
    ASSERT_TRUE(box.DeadLetter(records->front(), "ROSTER_MISMATCH", kAwkwardText).ok());
  }

  const auto ls = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.out;
  const auto listing = ParseJson<v1::OutboxListing>(ls.out);
  ASSERT_EQ(listing.records_size(), 1) << ls.out;
  EXPECT_EQ(listing.records(0).room_id(), 81u);
  EXPECT_EQ(listing.records(0).where(), "dead-letter");
  EXPECT_EQ(listing.records(0).reason(), "ROSTER_MISMATCH");
  EXPECT_EQ(listing.records(0).detail(), kAwkwardText);
  EXPECT_FALSE(listing.records(0).has_result()) << "only `show` prints the result";
  EXPECT_TRUE(listing.complete());

  const auto show = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "show", "81"});
  ASSERT_EQ(show.exit_code, 0) << show.out;
  const auto shown = ParseJson<v1::OutboxListing>(show.out);
  ASSERT_EQ(shown.records_size(), 1) << show.out;
  EXPECT_EQ(shown.records(0).detail(), kAwkwardText);
  EXPECT_EQ(wire::DeterministicBytes(shown.records(0).result()),
            wire::DeterministicBytes(MakeResult(81)));

  const auto stats = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "stats", "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.out;
  const auto counted = ParseJson<v1::OutboxStats>(stats.out);
  EXPECT_EQ(counted.records(), 0);
  EXPECT_EQ(counted.dead_lettered(), 1);
  EXPECT_EQ(counted.shards_size(), 16);
  EXPECT_GT(counted.free_disk_bytes(), 0);

  const std::string listing_file = dir.Sub("node-a.json");
  std::ofstream(listing_file) << ls.out;
  const auto reconcile =
      RunCommand({LobbyBinary(), "--db", db_->conninfo(), "reconcile", "--older-than", "0",
                  "--json", "--outbox", "node-a=" + listing_file});
  ASSERT_EQ(reconcile.exit_code, 0) << reconcile.out;
  const auto report = ParseJson<v1::Reconciliation>(reconcile.out);
  ASSERT_EQ(report.pending_size(), 1) << reconcile.out;
  EXPECT_EQ(report.pending(0).room_id(), 81u);
  EXPECT_EQ(report.pending(0).state(), "dead-lettered");
  EXPECT_EQ(report.pending(0).reason(), "ROSTER_MISMATCH");
  EXPECT_EQ(report.pending(0).detail(), kAwkwardText);
  EXPECT_EQ(report.counts().at("dead-lettered"), 1u);
}

TEST_F(NodeEndToEndTest, StatsWorkWhileARunningNodeHoldsTheOutbox) {
  TempDir dir;
  node::NodeOptions options;
  options.node_id = "node-a";
  options.outbox_dir = dir.Sub("outbox");
  options.lobby_urls = {"http://127.0.0.1:1"};
  options.token = "token-a";
  auto node = node::BattleNode::Start(options);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  const auto stats =
      RunCommand({NodeBinary(), "outbox", "--outbox", options.outbox_dir, "stats", "--json"});
  EXPECT_EQ(stats.exit_code, 0) << stats.out;
  EXPECT_NE(stats.out.find("\"records\":0,"), std::string::npos) << stats.out;
  // Changing it needs the node stopped, and says so.
  const auto redrive = RunCommand({NodeBinary(), "outbox", "--outbox", options.outbox_dir,
                                   "redrive", "--from", "dead-letter", "--all"});
  EXPECT_NE(redrive.exit_code, 0);
}

TEST_F(NodeEndToEndTest, DeadLetteredResultIsRedrivenOnceTheCauseIsFixed) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("result.json");
  std::ofstream(file) << wire::EncodeBody(MakeResult(61), wire::BodyFormat::kJson).value();
  ASSERT_EQ(RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, file}).exit_code, 0);

  // Room 61 was never allocated: the lobby refuses it as final, the node dead-letters it.
  auto run = RunCommand(RunArgs(outbox, lobby->port()));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  auto ls = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "ls", "--json"});
  EXPECT_NE(ls.out.find("\"room_id\":\"61\",\"where\":\"dead-letter\""), std::string::npos)
      << ls.out;
  EXPECT_NE(ls.out.find("\"reason\":\"ROOM_UNKNOWN\""), std::string::npos) << ls.out;

  MustAllocate(lobby->port(), 61);
  const auto redrive = RunCommand(
      {NodeBinary(), "outbox", "--outbox", outbox, "redrive", "--from", "dead-letter", "61"});
  ASSERT_EQ(redrive.exit_code, 0) << redrive.out;
  EXPECT_NE(redrive.out.find("1 moved"), std::string::npos) << redrive.out;
  run = RunCommand(RunArgs(outbox, lobby->port()));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts WHERE room_id = 61"), "1");
  const auto stats = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "stats", "--json"});
  EXPECT_NE(stats.out.find("\"records\":0,"), std::string::npos);
  EXPECT_NE(stats.out.find("\"dead_lettered\":0,"), std::string::npos) << stats.out;
}

TEST_F(NodeEndToEndTest, ResultTheDatabaseRefusesIsDeadLetteredAndRedrivenAfterTheFix) {
  // A test-only constraint that this one result breaks: the lobby answers 500 INTERNAL, not
  // retryable, and the node must dead-letter it rather than retry it forever.
  db_->Exec("ALTER TABLE match_players ADD CONSTRAINT test_kills_below_1000 CHECK (kills < 1000)");
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 62);
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("result.json");
  v1::BattleResult strange = MakeResult(62);
  strange.mutable_players(0)->set_kills(5000);
  std::ofstream(file) << wire::EncodeBody(strange, wire::BodyFormat::kJson).value();
  ASSERT_EQ(RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, file}).exit_code, 0);

  auto run = RunCommand(RunArgs(outbox, lobby->port()));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  auto ls = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "ls", "--json"});
  EXPECT_NE(ls.out.find("\"room_id\":\"62\",\"where\":\"dead-letter\""), std::string::npos)
      << ls.out;
  EXPECT_NE(ls.out.find("\"reason\":\"INTERNAL\""), std::string::npos) << ls.out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "0");

  db_->Exec("ALTER TABLE match_players DROP CONSTRAINT test_kills_below_1000");
  const auto redrive = RunCommand(
      {NodeBinary(), "outbox", "--outbox", outbox, "redrive", "--from", "dead-letter", "62"});
  ASSERT_EQ(redrive.exit_code, 0) << redrive.out;
  run = RunCommand(RunArgs(outbox, lobby->port()));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts WHERE room_id = 62"), "1");
}

// TLS between node and lobby: a lobby serving HTTPS only, a node that trusts its certificate
// delivers; a node that does not (the system's authorities) delivers nothing and keeps it all.
TEST_F(NodeEndToEndTest, DeliversOverTlsOnlyToALobbyItTrusts) {
  TempDir dir;
  const std::string cert = dir.Sub("lobby.crt"), key = dir.Sub("lobby.key");
  const CommandResult made =
      RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                  key, "-out", cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
                  "subjectAltName=IP:127.0.0.1,DNS:localhost"});
  ASSERT_EQ(made.exit_code, 0) << "openssl could not make a test certificate";
  auto plain = StartLobby();  // for allocation; both serve the same database
  auto tls = StartLobby({"--tls-cert", cert, "--tls-key", key});
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(tls, nullptr);
  const std::string results = dir.Sub("results.jsonl");
  {
    std::ofstream out(results);
    for (uint64_t room : {11, 12, 13}) {
      MustAllocate(plain->port(), room);
      out << wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value() << "\n";
    }
  }
  const std::string outbox = dir.Sub("outbox");
  ASSERT_EQ(RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, results}).exit_code, 0);
  auto args = RunArgs(outbox, tls->port());
  for (auto& a : args) {
    if (a.rfind("http://", 0) == 0) a = "https://" + a.substr(7);
  }

  // Untrusted: the handshake fails, nothing is sent, everything stays in the outbox. The node
  // runs until it has logged the refused handshake, however long it takes to get there.
  auto untrusted = ChildProcess::Start(args, {}, dir.Sub("untrusted.log"));
  ASSERT_NE(untrusted, nullptr);
  const auto logged = [&] {
    std::ifstream log(dir.Sub("untrusted.log"));
    return std::string((std::istreambuf_iterator<char>(log)), {});
  };
  EXPECT_TRUE(
      WaitUntil([&] { return logged().find("certificate verify failed") != std::string::npos; },
                std::chrono::seconds(30)))
      << logged();
  EXPECT_TRUE(untrusted->Running()) << logged();
  untrusted->Kill();
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "0");

  // Plain HTTP to the TLS port is not answered as HTTP either.
  EXPECT_NE(HttpCall(tls->port(), "GET", "/healthz").status, 200);

  // Trusted: delivered and settled.
  args.push_back("--tls-ca");
  args.push_back(cert);
  const CommandResult run = RunCommand(args);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "3");
}

}  // namespace
}  // namespace verdict::testing
