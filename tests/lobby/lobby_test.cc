// The lobby against a real PostgreSQL: exactly-once settlement (P2), the error contract,
// early-release protection (P5), commit-unknown handling, events, allocation and
// reconciliation. Each test gets its own database and lobby processes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <latch>
#include <set>
#include <thread>

#include "tests/lobby/lobby_fixture.h"
#include "tests/sql/unguarded_settle_sql.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using LobbyTest = LobbyFixture;

// The room_id of a /v1/events message ({"event_id": "N", "event": {…, "room_id": "R"}}).
std::string EventRoom(const std::string& message) {
  google::protobuf::Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(message, &parsed).ok()) return "unparsable";
  const auto& event = parsed.fields().at("event").struct_value();
  if (!event.fields().contains("room_id") ||
      event.fields().at("type").string_value() != "battle.settled") {
    return "malformed";
  }
  return event.fields().at("room_id").string_value();
}

// A plain TCP connection to the lobby, for clients that misbehave below HTTP.
int ConnectRaw(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST_F(LobbyTest, FirstSettlementThenReplayIsDuplicateAndEloMovesOnce) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 1);
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) = 1"), "10");

  const HttpResponse first = Settle(lobby->port(), MakeResult(1));
  ASSERT_EQ(first.status, 200) << first.body;
  const v1::SettlementReceipt r1 = Receipt(first);
  EXPECT_FALSE(r1.duplicate());
  EXPECT_GT(r1.match_id(), 0u);
  EXPECT_EQ(r1.outcome(), v1::SETTLED);
  EXPECT_NE(first.body.find("\"duplicate\":false"), std::string::npos) << first.body;

  const HttpResponse again = Settle(lobby->port(), MakeResult(1));
  ASSERT_EQ(again.status, 200) << again.body;
  const v1::SettlementReceipt r2 = Receipt(again);
  EXPECT_TRUE(r2.duplicate());
  EXPECT_EQ(r2.match_id(), r1.match_id());

  // Team 1 (players 11..15) won at equal ratings: +16 each; team 2: -16 each; once.
  EXPECT_EQ(Q("SELECT string_agg(rating::text, ',' ORDER BY player_id) FROM player_ratings"),
            "1516,1516,1516,1516,1516,1484,1484,1484,1484,1484");
  EXPECT_EQ(Q("SELECT sum(games) FROM player_ratings"), "10");
  EXPECT_EQ(Q("SELECT sum(wins) || '/' || sum(losses) FROM player_ratings"), "5/5");
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "1");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "1");
  EXPECT_EQ(Q("SELECT count(*) FROM replays"), "1");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
}

TEST_F(LobbyTest, SettlementUsesTeamAverageRatings) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 2);
  // Team 1 averages 1600 (1500..1700), team 2 averages 1400, as the players were when the room
  // was allocated (a room is rated on the ratings recorded with its seats).
  const std::string ratings =
      "CASE player_id WHEN '21' THEN 1500 WHEN '22' THEN 1550 WHEN '23' THEN 1600 "
      "WHEN '24' THEN 1650 WHEN '25' THEN 1700 ELSE 1400 END";
  db_->Exec(
      "INSERT INTO player_ratings (mode_id, player_id, rating, displayed) SELECT "
      "(SELECT mode_id FROM modes WHERE mode = 'default'), player_id, " +
      ratings + ", 0 FROM players");
  db_->Exec("UPDATE battle_room_seats SET rating_at_allocation = " + ratings);
  auto draw = MakeResult(2);
  draw.set_winner_team(0);
  ASSERT_EQ(Settle(lobby->port(), draw).status, 200);
  EXPECT_EQ(Q("SELECT string_agg(rating::text, ',' ORDER BY player_id) FROM player_ratings"),
            "1492,1542,1592,1642,1692,1408,1408,1408,1408,1408");
  EXPECT_EQ(Q("SELECT sum(draws) FROM player_ratings"), "10");
}

TEST_F(LobbyTest, AbortedReleasesPlayersWithoutTouchingRatings) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 3);
  auto aborted = MakeResult(3);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  aborted.set_abort_reason("no_consensus");
  const HttpResponse r = Settle(lobby->port(), aborted);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Receipt(r).outcome(), v1::ABORTED);
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM player_ratings"), "0") << "an abort rated someone";
  EXPECT_EQ(Q("SELECT abort_reason FROM matches"), "no_consensus");
}

struct ConcurrencyReport {
  int ok = 0;
  int first_settlements = 0;  // 200 with duplicate: false
  std::set<uint64_t> match_ids;
  std::vector<int> statuses;
};

// Fires `n` identical settlements at once, alternating between two lobbies.
ConcurrencyReport FireTogether(uint16_t port_a, uint16_t port_b, const v1::BattleResult& result,
                               int n) {
  ConcurrencyReport report;
  std::vector<HttpResponse> responses(n);
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      responses[i] = HttpCall(i % 2 ? port_b : port_a, "POST", "/v1/settlements",
                              LobbyFixture::JsonHeaders("token-a"),
                              wire::EncodeBody(result, wire::BodyFormat::kJson).value());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : responses) {
    report.statuses.push_back(r.status);
    if (r.status != 200) continue;
    ++report.ok;
    v1::SettlementReceipt receipt;
    std::string error;
    if (!wire::DecodeBody(r.body, wire::BodyFormat::kJson, &receipt, &error)) continue;
    report.match_ids.insert(receipt.match_id());
    if (!receipt.duplicate()) ++report.first_settlements;
  }
  return report;
}

TEST_F(LobbyTest, ConcurrentIdenticalSettlementsOnTwoLobbiesSettleOnce) {
  auto a = StartLobby();
  auto b = StartLobby();
  ASSERT_TRUE(a && b);
  MustAllocate(a->port(), 4);
  const ConcurrencyReport report = FireTogether(a->port(), b->port(), MakeResult(4), 32);
  EXPECT_EQ(report.ok, 32) << ::testing::PrintToString(report.statuses);
  EXPECT_EQ(report.match_ids.size(), 1u);
  EXPECT_EQ(report.first_settlements, 1);
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "1");
  EXPECT_EQ(Q("SELECT count(*) FROM match_players"), "10");
  EXPECT_EQ(Q("SELECT max(games) FROM player_ratings"), "1");
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT rating::text, ',') FROM player_ratings"), "1484,1516");
}

// Negative control: with the advisory lock, receipt check and room lock skipped (the test-only
// settlement of tests/sql/unguarded_settle.sql), the same test no longer sees 32 clean
// answers. The receipt's unique key still refuses the second settlement, and with it the match
// written in the same transaction, so ratings stay single: the defence in depth holds.
TEST_F(LobbyTest, NegativeControlWithoutSettleGuardIsCaughtAndConstraintsStillHold) {
  db_->Exec(kUnguardedSettleSql);
  auto a = StartLobby();
  auto b = StartLobby();
  ASSERT_TRUE(a && b);
  MustAllocate(a->port(), 5);
  const ConcurrencyReport report = FireTogether(a->port(), b->port(), MakeResult(5), 32);
  const bool clean =
      report.ok == 32 && report.match_ids.size() == 1 && report.first_settlements == 1;
  EXPECT_FALSE(clean) << "the concurrency checks did not notice the missing guard";
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "1");
  EXPECT_EQ(Q("SELECT max(games) FROM player_ratings"), "1");
}

// Negative control, second layer: guard off and the receipt's unique key dropped (the one the
// database enforces per room since the history is partitioned, sql/001_baseline.sql). Now the
// damage P2 forbids happens, and the test's Elo checks see it.
TEST_F(LobbyTest, NegativeControlWithoutGuardOrConstraintsSeesDoubleElo) {
  db_->Exec("ALTER TABLE settlement_receipts DROP CONSTRAINT settlement_receipts_pkey;");
  db_->Exec(kUnguardedSettleSql);
  auto a = StartLobby();
  auto b = StartLobby();
  ASSERT_TRUE(a && b);
  MustAllocate(a->port(), 6);
  // Both lobbies hold a database connection already, so both transactions start at once.
  ASSERT_EQ(HttpCall(a->port(), "GET", "/readyz").status, 200);
  ASSERT_EQ(HttpCall(b->port(), "GET", "/readyz").status, 200);
  FireTogether(a->port(), b->port(), MakeResult(6), 32);
  EXPECT_GT(std::stoi(Q("SELECT count(*) FROM matches")), 1);
  EXPECT_GT(std::stoi(Q("SELECT max(games) FROM player_ratings")), 1) << "double Elo not visible";
}

TEST_F(LobbyTest, ConflictsAndMismatchesAreRefusedWithoutChangingAnything) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 7);
  MustAllocate(lobby->port(), 8);
  ASSERT_EQ(Settle(lobby->port(), MakeResult(7)).status, 200);
  const DbSnapshot before = Snapshot();

  auto aborted = MakeResult(7);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  HttpResponse r = Settle(lobby->port(), aborted);
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.body.find("\"code\":\"OUTCOME_CONFLICT\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"retryable\":false"), std::string::npos);
  EXPECT_EQ(r.headers["content-type"], "application/problem+json");

  auto changed = MakeResult(7);
  changed.mutable_players(0)->set_kills(99);
  r = Settle(lobby->port(), changed);
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("IDEMPOTENCY_MISMATCH"), std::string::npos) << r.body;

  auto wrong_roster = MakeResult(8);
  wrong_roster.mutable_players(0)->set_player_id("999");
  r = Settle(lobby->port(), wrong_roster);
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("ROSTER_MISMATCH"), std::string::npos) << r.body;
  auto swapped_team = MakeResult(8);
  swapped_team.mutable_players(0)->set_team(2);
  swapped_team.mutable_players(9)->set_team(1);
  r = Settle(lobby->port(), swapped_team);
  EXPECT_EQ(r.status, 422) << r.body;

  EXPECT_EQ(Snapshot(), before);
}

TEST_F(LobbyTest, UnknownRoomAndAnotherNodesRoomGetIdenticalAnswers) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 9, "node-a");
  const DbSnapshot before = Snapshot();
  // node-b asks about node-a's room 9, and about room 10 that nobody allocated.
  const HttpResponse foreign =
      Settle(lobby->port(), MakeResult(9, 1'700'000'000'000, "node-b"), "token-b");
  auto never = MakeResult(9, 1'700'000'000'000, "node-b");
  never.set_room_id(10);
  const HttpResponse unknown = Settle(lobby->port(), never, "token-b");
  EXPECT_EQ(foreign.status, 404);
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(foreign.body, unknown.body);
  EXPECT_NE(foreign.body.find("ROOM_UNKNOWN"), std::string::npos);
  EXPECT_EQ(Snapshot(), before);

  // After node-a settles it, node-b still cannot see it, and reads agree.
  ASSERT_EQ(Settle(lobby->port(), MakeResult(9)).status, 200);
  const HttpResponse after =
      Settle(lobby->port(), MakeResult(9, 1'700'000'000'000, "node-b"), "token-b");
  EXPECT_EQ(after.status, 404);
  EXPECT_EQ(after.body, unknown.body);
  const auto read_b =
      HttpCall(lobby->port(), "GET", "/v1/settlements/9", {{"Authorization", "Bearer token-b"}});
  const auto read_none =
      HttpCall(lobby->port(), "GET", "/v1/settlements/10", {{"Authorization", "Bearer token-b"}});
  EXPECT_EQ(read_b.status, 404);
  EXPECT_EQ(read_b.body, read_none.body);
  const auto read_a =
      HttpCall(lobby->port(), "GET", "/v1/settlements/9", {{"Authorization", "Bearer token-a"}});
  EXPECT_EQ(read_a.status, 200) << read_a.body;
}

TEST_F(LobbyTest, MissingOrWrongTokenIs401) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 11);
  const DbSnapshot before = Snapshot();
  const std::string body = wire::EncodeBody(MakeResult(11), wire::BodyFormat::kJson).value();
  for (const char* auth : {"", "Bearer wrong", "Bearer token-a-but-longer", "Basic x", "Bearer ",
                           "Bearer admin-token"}) {
    std::map<std::string, std::string> headers = {{"Content-Type", "application/json"}};
    if (*auth) headers["Authorization"] = auth;
    const auto r = HttpCall(lobby->port(), "POST", "/v1/settlements", headers, body);
    EXPECT_EQ(r.status, 401) << "Authorization: " << auth << " → " << r.body;
    EXPECT_NE(r.body.find("UNAUTHENTICATED"), std::string::npos);
  }
  // A node token cannot allocate rooms.
  const auto r = HttpCall(lobby->port(), "POST", "/v1/rooms", JsonHeaders("token-a"), "{}");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(LobbyTest, NodeTokensFileIsRead) {
  TempDir dir;
  const std::string file = dir.Sub("tokens");
  std::ofstream(file) << "# node_id token\nnode-c token-c\n\nnode-d token-d\n";
  auto lobby = StartLobby({"--node-tokens-file", file});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 18, "node-d");
  EXPECT_EQ(Settle(lobby->port(), MakeResult(18, 1'700'000'000'000, "node-d"), "token-d").status,
            200);
  std::ofstream(file) << "node-e\n";
  const auto refused = RunCommand({LobbyBinary(), "--db", db_->conninfo(), "serve",
                                   "--node-tokens-file", file, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_code, 1) << "a malformed tokens file must stop the lobby";
}

TEST_F(LobbyTest, MalformedBodiesGetTheirStatusAndChangeNothing) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 12);
  const DbSnapshot before = Snapshot();
  const auto post = [&](const std::string& type, const std::string& body) {
    return HttpCall(lobby->port(), "POST", "/v1/settlements",
                    {{"Content-Type", type}, {"Authorization", "Bearer token-a"}}, body);
  };
  EXPECT_EQ(post("application/x-protobuf", "\xff\xff\xff\xff garbage").status, 400);
  EXPECT_EQ(post("application/json", "{\"room_id\": \"12\", ").status, 400);
  EXPECT_EQ(post("application/json", "{\"room_id\": \"12\", \"no_such_field\": 1}").status, 400);
  EXPECT_EQ(post("application/json", "[1,2,3]").status, 400);
  EXPECT_EQ(post("application/json", "{\"room_id\": \"-4\"}").status, 400);
  EXPECT_EQ(post("text/plain", "hello").status, 415);
  EXPECT_EQ(post("", "").status, 415);
  const HttpResponse big = post("application/x-protobuf", std::string(2 << 20, 'x'));
  EXPECT_EQ(big.status, 413) << big.error;
  EXPECT_NE(big.body.find("PAYLOAD_TOO_LARGE"), std::string::npos);

  // Valid encodings of invalid results.
  auto no_players = MakeResult(12);
  no_players.clear_players();
  EXPECT_EQ(Settle(lobby->port(), no_players).status, 400);
  auto bad_team = MakeResult(12);
  bad_team.mutable_players(0)->set_team(7);
  EXPECT_EQ(Settle(lobby->port(), bad_team).status, 400);
  auto twice = MakeResult(12);
  twice.mutable_players(1)->set_player_id(twice.players(0).player_id());
  EXPECT_EQ(Settle(lobby->port(), twice).status, 400);
  auto wrong_node = MakeResult(12, 1'700'000'000'000, "node-b");
  EXPECT_EQ(Settle(lobby->port(), wrong_node).status, 400);
  auto nul = MakeResult(12);
  nul.set_replay_path(std::string("a\0b", 3));
  EXPECT_EQ(Settle(lobby->port(), nul).status, 400);
  auto unspecified = MakeResult(12);
  unspecified.set_outcome(v1::OUTCOME_UNSPECIFIED);
  EXPECT_EQ(Settle(lobby->port(), unspecified).status, 400);

  EXPECT_EQ(Snapshot(), before);
  // The lobby is still serving, and the room still settles.
  EXPECT_EQ(Settle(lobby->port(), MakeResult(12)).status, 200);
}

TEST_F(LobbyTest, ProtobufBodiesWorkAndFingerprintIgnoresEncoding) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 13);
  const auto r =
      HttpCall(lobby->port(), "POST", "/v1/settlements",
               {{"Content-Type", "application/x-protobuf"}, {"Authorization", "Bearer token-a"}},
               wire::EncodeBody(MakeResult(13), wire::BodyFormat::kProtobuf).value());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "application/x-protobuf");
  v1::SettlementReceipt receipt;
  ASSERT_TRUE(receipt.ParseFromString(r.body));
  EXPECT_FALSE(receipt.duplicate());
  // The same result as JSON is the same payload: a duplicate, not a mismatch.
  const HttpResponse json = Settle(lobby->port(), MakeResult(13));
  ASSERT_EQ(json.status, 200) << json.body;
  EXPECT_TRUE(Receipt(json).duplicate());
}

// A result naming no winner was settled as a draw from protobuf, and a draw beside placements
// that name a winner as the placements' win (issue 49, items 1 and 2): both are 400 in JSON and
// protobuf alike, alone and in a batch, and nothing is settled; the room then settles as said.
TEST_F(LobbyTest, AResultNamingNoWinnerOrTwoIs400InEveryFormat) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 14);
  const DbSnapshot before = Snapshot();
  auto unnamed = MakeResult(14);
  unnamed.clear_winner_team();
  auto contradiction = MakeResult(14);
  contradiction.set_winner_team(0);
  for (auto [team, rank] : {std::pair{1u, 1u}, std::pair{2u, 2u}}) {
    v1::TeamPlacement* p = contradiction.add_placements();
    p->set_team(team);
    p->set_rank(rank);
  }
  for (const v1::BattleResult& bad : {unnamed, contradiction}) {
    EXPECT_EQ(Settle(lobby->port(), bad).status, 400);
    const auto proto =
        HttpCall(lobby->port(), "POST", "/v1/settlements",
                 {{"Content-Type", "application/x-protobuf"}, {"Authorization", "Bearer token-a"}},
                 wire::EncodeBody(bad, wire::BodyFormat::kProtobuf).value());
    EXPECT_EQ(proto.status, 400) << proto.body;
    const HttpResponse batch = PostBatch(lobby->port(), {bad});
    ASSERT_EQ(batch.status, 200) << batch.body;
    EXPECT_EQ(CodeOf(Items(batch).items(0)), "INVALID_ARGUMENT");
  }
  EXPECT_EQ(Snapshot(), before);
  auto draw = MakeResult(14);
  draw.set_winner_team(0);
  ASSERT_EQ(Settle(lobby->port(), draw).status, 200);
  EXPECT_EQ(Q("SELECT sum(draws) FROM player_ratings"), "10");
}

// Runs one settlement with the database failing before COMMIT and reports what it left.
struct FailureProbe {
  int status = 0;
  std::string retry_after;
  std::string rooms, seats, in_battle, receipts;
};

FailureProbe SettleWithFailureBeforeCommit(LobbyFixture& f, LobbyProcess& lobby, uint64_t room) {
  FailureProbe probe;
  const HttpResponse r = f.Settle(lobby.port(), MakeResult(room));
  probe.status = r.status;
  auto it = r.headers.find("retry-after");
  if (it != r.headers.end()) probe.retry_after = it->second;
  probe.rooms = f.Q("SELECT count(*) FROM battle_rooms WHERE room_id = " + std::to_string(room));
  probe.seats =
      f.Q("SELECT count(*) FROM battle_room_seats WHERE room_id = " + std::to_string(room));
  probe.in_battle = f.Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) = " +
                        std::to_string(room));
  probe.receipts = f.Q("SELECT count(*) FROM settlement_receipts");
  return probe;
}

TEST_F(LobbyTest, DatabaseFailingBeforeCommitIs503AndLeavesTheRoomIntact) {
  auto lobby = StartLobby({}, {{"VERDICT_FAILPOINTS", "settle.before_commit=error*1"}});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 14);
  const FailureProbe probe = SettleWithFailureBeforeCommit(*this, *lobby, 14);
  EXPECT_EQ(probe.status, 503);
  EXPECT_EQ(probe.retry_after, "1");
  EXPECT_EQ(probe.rooms, "1");
  EXPECT_EQ(probe.seats, "10");
  EXPECT_EQ(probe.in_battle, "10") << "players released before the settlement committed";
  EXPECT_EQ(probe.receipts, "0");

  const HttpResponse retry = Settle(lobby->port(), MakeResult(14));
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_FALSE(Receipt(retry).duplicate());
  EXPECT_EQ(Q("SELECT max(games) || ':' || count(*) FROM player_ratings"), "1:10");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
}

// Negative control: releasing in_battle in its own transaction before the settlement commits
// is exactly the early release P5 forbids; the same probe must see it.
TEST_F(LobbyTest, NegativeControlReleasingBeforeCommitIsCaught) {
  auto lobby = LobbyProcess::Start(db_->conninfo(), {"--unsafe-release-before-commit"},
                                   {{"VERDICT_FAILPOINTS", "settle.before_commit=error*1"}},
                                   "127.0.0.1:0", LobbyTestingBinary());
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 15);
  const FailureProbe probe = SettleWithFailureBeforeCommit(*this, *lobby, 15);
  EXPECT_EQ(probe.status, 503);
  EXPECT_EQ(probe.receipts, "0");
  EXPECT_NE(probe.in_battle, "10") << "the probe did not notice players released early";
}

// The reply of a committed batch is lost (the failpoint discards the connection after the
// statement returned), so the lobby reads the rooms' receipts back and must tell them apart by
// attempt: the room this call settled is answered settled, the rooms an earlier call settled
// as they would have been answered anyway. (The connection really lost during COMMIT, and during
// the statement, is lobby_resilience_test's LobbyCommitUnknownTest and
// BackendTerminatedMidSettlementIs503ThenSettlesOnce.)
TEST_F(LobbyTest, CommitOutcomeUnknownIsAnsweredFromTheReceiptsByAttempt) {
  HttpResponse earlier;
  {  // three of the rooms settled earlier, by a lobby without the failpoint
    auto before = StartLobby();
    ASSERT_NE(before, nullptr);
    for (uint64_t room : {16, 160, 161, 162}) MustAllocate(before->port(), room);
    earlier = Settle(before->port(), MakeResult(160));
    ASSERT_EQ(earlier.status, 200) << earlier.body;
    ASSERT_EQ(Settle(before->port(), MakeResult(161)).status, 200);
    ASSERT_EQ(Settle(before->port(), MakeResult(162)).status, 200);
  }
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "3");
  TempDir dir;
  const std::string log = dir.Sub("lobby.log");
  auto lobby = LobbyProcess::Start(db_->conninfo(), {},
                                   {{"VERDICT_FAILPOINTS", "settle.commit_unknown=error*1"}},
                                   "127.0.0.1:0", LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr);
  v1::BattleResult other_outcome = MakeResult(161);
  other_outcome.set_outcome(v1::ABORTED);
  other_outcome.set_winner_team(0);
  v1::BattleResult other_payload = MakeResult(162);
  other_payload.mutable_players(0)->set_kills(99);

  const HttpResponse first =
      PostBatch(lobby->port(), {MakeResult(16), MakeResult(160), other_outcome, other_payload});
  ASSERT_EQ(first.status, 200) << first.body;
  const v1::SettlementBatchReply items = Items(first);
  std::vector<std::string> codes;
  for (const auto& item : items.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"SETTLED", "DUPLICATE", "OUTCOME_CONFLICT",
                                             "IDEMPOTENCY_MISMATCH"}));
  ASSERT_EQ(items.items_size(), 4);
  EXPECT_EQ(items.items(1).receipt().match_id(), Receipt(earlier).match_id());
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "4");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "4") << "an event was lost or doubled";
  // The answers above came from the receipts read back, not from the statement's rows.
  std::ifstream logged(log);
  const std::string lines((std::istreambuf_iterator<char>(logged)), {});
  EXPECT_NE(lines.find("failpoint settle.commit_unknown fired"), std::string::npos) << lines;

  const HttpResponse retry = Settle(lobby->port(), MakeResult(16));
  ASSERT_EQ(retry.status, 200);
  EXPECT_TRUE(Receipt(retry).duplicate());
  EXPECT_EQ(Receipt(retry).match_id(), items.items(0).receipt().match_id());
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "4");
}

TEST_F(LobbyTest, DatabaseDownIs503WithRetryAfterAndReadyzSaysSo) {
  // A lobby pointed at a database that does not exist behaves like one whose database is down.
  auto lobby = LobbyProcess::Start("dbname=verdict_no_such_database");
  ASSERT_NE(lobby, nullptr);
  const HttpResponse r = Settle(lobby->port(), MakeResult(17));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers.count("retry-after") ? r.headers.at("retry-after") : "", "1");
  EXPECT_NE(r.body.find("\"retryable\":true"), std::string::npos);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/readyz").status, 503);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/healthz").status, 200);
}

// A problem reply's retry contract: retryable with Retry-After, or terminal without it.
void ExpectProblem(const HttpResponse& r, int status, const std::string& code, bool retryable) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_NE(
      r.body.find("\"code\":\"" + code + "\",\"retryable\":" + (retryable ? "true" : "false")),
      std::string::npos)
      << r.body;
  EXPECT_EQ(r.headers.count("retry-after"), retryable ? 1u : 0u) << r.body;
}

TEST_F(LobbyTest, SettlementTheDatabaseRefusesIsATerminalInternalProblemAndChangesNothing) {
  // A test-only constraint that one strange result breaks: the settlement's own insert fails
  // with a check violation (23514), the same way however often it is retried.
  db_->Exec("ALTER TABLE match_players ADD CONSTRAINT test_kills_below_1000 CHECK (kills < 1000)");
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 31);
  MustAllocate(lobby->port(), 32);
  v1::BattleResult strange = MakeResult(31);
  strange.mutable_players(0)->set_kills(5000);
  const DbSnapshot before = Snapshot();

  const HttpResponse refused = Settle(lobby->port(), strange);
  ExpectProblem(refused, 500, "INTERNAL", false);
  EXPECT_NE(refused.body.find("23514"), std::string::npos) << refused.body;
  EXPECT_EQ(Snapshot(), before) << "a refused settlement changed the database";
  ExpectProblem(Settle(lobby->port(), strange), 500, "INTERNAL", false);
  EXPECT_EQ(Snapshot(), before);

  // Only that result is refused: the next room settles.
  ASSERT_EQ(Settle(lobby->port(), MakeResult(32)).status, 200);
  // Once the cause is fixed, the same result (a node's redrive) settles, room and roster intact.
  db_->Exec("ALTER TABLE match_players DROP CONSTRAINT test_kills_below_1000");
  const HttpResponse fixed = Settle(lobby->port(), strange);
  ASSERT_EQ(fixed.status, 200) << fixed.body;
  EXPECT_FALSE(Receipt(fixed).duplicate());
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "2");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
}

TEST_F(LobbyTest, DatabaseErrorsAreRetryableExactlyWhenARetryMaySucceed) {
  // A test-only trigger fails the settlement's insert into matches with the SQLSTATE that
  // test_settle_failure holds: each kind of database error on demand, on a live connection.
  db_->Exec(
      "CREATE TABLE test_settle_failure (sqlstate text NOT NULL);"
      "CREATE FUNCTION test_fail_settlement() RETURNS trigger LANGUAGE plpgsql AS $$"
      " DECLARE s text; BEGIN"
      "  SELECT sqlstate INTO s FROM test_settle_failure;"
      "  IF s IS NOT NULL THEN RAISE EXCEPTION 'test-only failure %', s USING ERRCODE = s; END IF;"
      "  RETURN NEW;"
      " END $$;"
      "CREATE TRIGGER test_fail_settlement BEFORE INSERT ON matches FOR EACH ROW"
      " EXECUTE FUNCTION test_fail_settlement()");
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 33);
  const DbSnapshot before = Snapshot();
  const std::pair<std::string, bool> cases[] = {
      // A retry may succeed: the connection or server went away, a lost race, a timeout or a
      // cancel, a server short of resources.
      {"08006", true},  // connection_failure
      {"57P01", true},  // admin_shutdown
      {"57P03", true},  // cannot_connect_now
      {"40001", true},  // serialization_failure
      {"40P01", true},  // deadlock_detected
      {"55P03", true},  // lock_not_available: the lock timeout on a stuck room
      {"57014", true},  // query_canceled: statement timeout, or the client hung up
      {"25P03", true},  // idle_in_transaction_session_timeout: the lobby's own work overran
      {"53100", true},  // disk_full
      {"53300", true},  // too_many_connections
      // The same call fails the same way.
      {"23514", false},  // check_violation
      {"23505", false},  // unique_violation
      {"22012", false},  // division_by_zero
      {"22003", false},  // numeric_value_out_of_range
      {"P0001", false},  // raise_exception
      {"XX000", false},  // internal_error
  };
  for (const auto& [sqlstate, retryable] : cases) {
    SCOPED_TRACE(sqlstate);
    db_->Exec("DELETE FROM test_settle_failure; INSERT INTO test_settle_failure VALUES ('" +
              sqlstate + "')");
    const HttpResponse r = Settle(lobby->port(), MakeResult(33));
    if (retryable) {
      ExpectProblem(r, 503, "UNAVAILABLE", true);
    } else {
      ExpectProblem(r, 500, "INTERNAL", false);
    }
    EXPECT_EQ(Snapshot(), before);
  }
  db_->Exec("DELETE FROM test_settle_failure");
  const HttpResponse settled = Settle(lobby->port(), MakeResult(33));
  ASSERT_EQ(settled.status, 200) << settled.body;
  EXPECT_FALSE(Receipt(settled).duplicate());
}

TEST_F(LobbyTest, UnmigratedDatabaseMakesSettlementsWaitNotFail) {
  // The lobby's statements meet a schema without them (a deploy before `migrate`): that is the
  // deployment's error, not the results', so they wait (503) instead of being refused for good.
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 34);
  // As if the newest migration had not run: its version is not recorded and the settlement
  // function is missing (42883, undefined_function).
  const std::string version = Q("SELECT max(version) FROM verdict_schema_migrations");
  const std::string name =
      Q("SELECT name FROM verdict_schema_migrations WHERE version = " + version);
  db_->Exec("DELETE FROM verdict_schema_migrations WHERE version = " + version +
            "; ALTER FUNCTION verdict_settle_prepare RENAME TO test_settle_prepare_moved");
  const DbSnapshot before = Snapshot();
  const HttpResponse waiting = Settle(lobby->port(), MakeResult(34));
  ExpectProblem(waiting, 503, "UNAVAILABLE", true);
  EXPECT_NE(waiting.body.find("not ready"), std::string::npos) << waiting.body;
  EXPECT_EQ(Snapshot(), before);

  // Negative control: with the schema's version in place, the same missing function is the
  // database refusing the settlement itself, which is terminal.
  db_->Exec("INSERT INTO verdict_schema_migrations (version, name) VALUES (" + version + ", '" +
            name + "')");
  ExpectProblem(Settle(lobby->port(), MakeResult(34)), 500, "INTERNAL", false);

  db_->Exec("ALTER FUNCTION test_settle_prepare_moved RENAME TO verdict_settle_prepare");
  ASSERT_EQ(Settle(lobby->port(), MakeResult(34)).status, 200);
}

// A database nobody has migrated yet: allocations and reads wait (503) as settlements do.
TEST_F(LobbyTest, UnmigratedDatabaseAnswersAllocationsAndReads503) {
  TestDatabase bare;
  auto lobby = LobbyProcess::Start(bare.conninfo());
  ASSERT_NE(lobby, nullptr);
  ExpectProblem(Allocate(lobby->port(), 35), 503, "UNAVAILABLE", true);
  for (const char* path : {"/v1/players/351", "/v1/settlements/35"}) {
    ExpectProblem(HttpCall(lobby->port(), "GET", path, {{"Authorization", "Bearer token-a"}}), 503,
                  "UNAVAILABLE", true);
  }
  ExpectProblem(Settle(lobby->port(), MakeResult(35)), 503, "UNAVAILABLE", true);
  ExpectProblem(HttpCall(lobby->port(), "GET", "/readyz"), 503, "UNAVAILABLE", true);
}

TEST_F(LobbyTest, SubscriberGetsEachEventOnceAndResumesWithAfter) {
  auto a = StartLobby();
  auto b = StartLobby();
  ASSERT_TRUE(a && b);
  WsClient live;
  ASSERT_TRUE(live.Connect(b->port(), "/v1/events", "token-a")) << live.error();
  for (uint64_t room : {21, 22, 23}) {
    MustAllocate(a->port(), room);
    ASSERT_EQ(Settle(a->port(), MakeResult(room)).status, 200);
  }
  // Settled at lobby a, heard at lobby b through NOTIFY.
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    auto message = live.Read(std::chrono::seconds(10));
    ASSERT_TRUE(message.has_value()) << "event " << i << " did not arrive";
    got.push_back(*message);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(EventRoom(got[i]), std::to_string(21 + i)) << got[i];
  // A duplicate delivery makes no new event.
  ASSERT_EQ(Settle(a->port(), MakeResult(21)).status, 200);
  EXPECT_FALSE(live.Read(std::chrono::milliseconds(1500)).has_value());

  // Reconnecting after the first event replays the two it missed, then goes live.
  const std::string first_id = Q("SELECT min(seq) FROM settlement_events");
  WsClient resumed;
  ASSERT_TRUE(resumed.Connect(a->port(), "/v1/events?after=" + first_id, "token-a"));
  auto m1 = resumed.Read(std::chrono::seconds(10));
  auto m2 = resumed.Read(std::chrono::seconds(10));
  ASSERT_TRUE(m1 && m2);
  EXPECT_EQ(EventRoom(*m1), "22") << *m1;
  EXPECT_EQ(EventRoom(*m2), "23") << *m2;
  MustAllocate(a->port(), 24);
  ASSERT_EQ(Settle(a->port(), MakeResult(24)).status, 200);
  auto m3 = resumed.Read(std::chrono::seconds(10));
  ASSERT_TRUE(m3);
  EXPECT_EQ(EventRoom(*m3), "24") << *m3;
  EXPECT_FALSE(resumed.Read(std::chrono::milliseconds(1000)).has_value());

  WsClient unauthenticated;
  EXPECT_FALSE(unauthenticated.Connect(a->port(), "/v1/events", "nope"));
}

// Regression: a lobby whose LISTEN connection came up late took the newest event at that moment
// as its baseline, so events committed in between never reached its live subscribers.
TEST_F(LobbyTest, EventsReachSubscribersWhenTheListenConnectionIsLate) {
  auto a = StartLobby();
  auto b = StartLobby({}, {{"VERDICT_FAILPOINTS", "hub.before_listen=error*1"}});  // 1 s late
  ASSERT_TRUE(a && b);
  WsClient live;
  ASSERT_TRUE(live.Connect(b->port(), "/v1/events", "token-a")) << live.error();
  for (uint64_t room : {61, 62, 63}) {
    MustAllocate(a->port(), room);
    ASSERT_EQ(Settle(a->port(), MakeResult(room)).status, 200);
  }
  for (uint64_t room : {61, 62, 63}) {
    auto message = live.Read(std::chrono::seconds(10));
    ASSERT_TRUE(message.has_value()) << "the event of room " << room << " did not arrive";
    EXPECT_EQ(EventRoom(*message), std::to_string(room)) << *message;
  }
}

TEST_F(LobbyTest, AllocationRulesAndReads) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 31);
  EXPECT_EQ(Allocate(lobby->port(), 31).status, 200) << "same allocation again is idempotent";
  EXPECT_EQ(Allocate(lobby->port(), 31, "node-b").status, 409);
  // Room 32 would seat the same ten players: they are busy in room 31.
  v1::RoomAllocation busy = MakeAllocation(32, "node-a", 311, 10);
  auto r = HttpCall(lobby->port(), "POST", "/v1/rooms", JsonHeaders("admin-token"),
                    wire::EncodeBody(busy, wire::BodyFormat::kJson).value());
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.body.find("PLAYER_BUSY"), std::string::npos) << r.body;
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "1");
  // A room of one busy player and new ones: refused, and it creates none of the new players.
  const std::string players = Q("SELECT count(*) FROM players");
  r = HttpCall(
      lobby->port(), "POST", "/v1/rooms", JsonHeaders("admin-token"),
      wire::EncodeBody(MakeAllocation(32, "node-a", 310, 10), wire::BodyFormat::kJson).value());
  EXPECT_NE(r.body.find("PLAYER_BUSY"), std::string::npos) << r.body;
  EXPECT_EQ(Q("SELECT count(*) FROM players"), players);
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE player_id = '310'"), "0");
  // A team left empty (teams 1, 2 and 4) and unknown nodes are refused.
  busy.mutable_seats(9)->set_team(4);
  r = HttpCall(lobby->port(), "POST", "/v1/rooms", JsonHeaders("admin-token"),
               wire::EncodeBody(busy, wire::BodyFormat::kJson).value());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Allocate(lobby->port(), 33, "node-z").status, 400);

  ASSERT_EQ(Settle(lobby->port(), MakeResult(31)).status, 200);
  r = Allocate(lobby->port(), 31);
  EXPECT_EQ(r.status, 409) << "room ids are never reused";
  EXPECT_NE(r.body.find("ROOM_ID_REUSED"), std::string::npos) << r.body;
  r = HttpCall(lobby->port(), "GET", "/v1/players/311", {{"Authorization", "Bearer token-a"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"games\":1"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"in_battle_room\":\"0\""), std::string::npos) << r.body;
  r = HttpCall(lobby->port(), "GET", "/v1/players/999999", {{"Authorization", "Bearer token-a"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("\"instance\":\"/v1/players/999999\""), std::string::npos)
      << "the problem names the player's own resource: " << r.body;
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/players/" + std::string(65, 'p'),
                     {{"Authorization", "Bearer token-a"}})
                .status,
            400);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/nowhere").status, 404);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/settlements", {{"Authorization", "Bearer token-a"}})
                .status,
            405);
  const auto metrics = HttpCall(lobby->port(), "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("verdict_lobby_settlements_total{code=\"OK\"} 1"), std::string::npos)
      << metrics.body;
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/readyz").status, 200);
}

// Readiness asks for this lobby's schema whole: the numbered version and every function file as
// this binary has it. A database whose function file differs (a lobby of another build migrated
// it, or nobody re-applied a changed file) would serve other settlement functions: not ready,
// until `migrate` applies this binary's.
TEST_F(LobbyTest, ReadinessNeedsThisLobbysFunctionFiles) {
  auto lobby = StartLobby({"--readiness-interval-ms", "100"});
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(HttpCall(lobby->port(), "GET", "/readyz").status, 200);
  db_->Exec(
      "UPDATE verdict_schema_functions SET sha256 = repeat('0', 64) "
      "WHERE name = 'functions/verdict_settle_write.sql'");
  ASSERT_TRUE(WaitUntil([&] { return HttpCall(lobby->port(), "GET", "/readyz").status == 503; }))
      << "ready with another verdict_settle_write";
  const HttpResponse not_ready = HttpCall(lobby->port(), "GET", "/readyz");
  EXPECT_NE(not_ready.body.find("functions/verdict_settle_write.sql"), std::string::npos)
      << not_ready.body;
  ASSERT_EQ(RunCommand({LobbyBinary(), "--db", db_->conninfo(), "migrate"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return HttpCall(lobby->port(), "GET", "/readyz").status == 200; }));
}

// Every command opens its connections with the lobby's defaults (lobby/pg/connection.h): against
// a database host that takes the connection and never answers, migrate, retain, new-epoch and
// reconcile each fail within the 5 s connect timeout, where libpq alone would wait for ever.
// Each runs under `timeout 60`, which a hang would meet (exit 124).
TEST_F(LobbyTest, OperatorCommandsGiveUpOnADatabaseThatNeverAnswers) {
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(silent, 16), 0);  // the kernel accepts; nobody ever reads or answers
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string db =
      "host=127.0.0.1 port=" + std::to_string(ntohs(addr.sin_port)) + " dbname=verdict";
  const std::vector<std::vector<std::string>> commands = {
      {"migrate"}, {"retain"}, {"new-epoch"}, {"reconcile", "--older-than", "1"}};
  std::vector<CommandResult> results(commands.size());
  std::vector<std::thread> runs;
  for (size_t i = 0; i < commands.size(); ++i) {
    runs.emplace_back([&, i] {
      // Its standard error with its output, under `timeout 60`.
      std::vector<std::string> argv = {"/bin/sh",     "-c",   "exec timeout 60 \"$0\" \"$@\" 2>&1",
                                       LobbyBinary(), "--db", db};
      argv.insert(argv.end(), commands[i].begin(), commands[i].end());
      results[i] = RunCommand(argv);
    });
  }
  for (auto& t : runs) t.join();
  ::close(silent);
  for (size_t i = 0; i < commands.size(); ++i) {
    EXPECT_NE(results[i].exit_code, 124) << commands[i][0] << " hung on the silent database";
    EXPECT_NE(results[i].exit_code, -1) << commands[i][0] << ": " << results[i].out;
    EXPECT_NE(results[i].exit_code, 0) << commands[i][0] << ": " << results[i].out;
    EXPECT_NE(results[i].out.find("connect"), std::string::npos)
        << commands[i][0] << ": " << results[i].out;
  }
}

TEST_F(LobbyTest, ReconcileListsAllocatedRoomsWithoutReceipt) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 41);
  MustAllocate(lobby->port(), 42, "node-b");
  ASSERT_EQ(Settle(lobby->port(), MakeResult(41)).status, 200);
  const auto json = RunCommand(
      {LobbyBinary(), "--db", db_->conninfo(), "reconcile", "--older-than", "0", "--json"});
  ASSERT_EQ(json.exit_code, 5) << "no listing: room 42 is unchecked, " << json.out;
  EXPECT_NE(json.out.find("\"room_id\":\"42\",\"node_id\":\"node-b\""), std::string::npos)
      << json.out;
  EXPECT_EQ(json.out.find("\"room_id\":\"41\""), std::string::npos);
  const auto table =
      RunCommand({LobbyBinary(), "--db", db_->conninfo(), "reconcile", "--older-than", "3600"});
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("0 rooms allocated more than 3600 s ago"), std::string::npos)
      << table.out;
  EXPECT_NE(RunCommand({LobbyBinary(), "reconcile"}).exit_code, 0) << "--older-than is required";
  // A threshold the database cannot subtract from now is a usage error, not INTERNAL.
  const auto too_old = RunCommand({"/bin/sh", "-c",
                                   LobbyBinary() + " --db '" + db_->conninfo() +
                                       "' reconcile --older-than 99999999999999 2>&1"});
  EXPECT_NE(too_old.exit_code, 0);
  EXPECT_NE(too_old.out.find("--older-than"), std::string::npos) << too_old.out;
  EXPECT_EQ(too_old.out.find("INTERNAL"), std::string::npos) << too_old.out;
}

// The operator's check: rooms without a receipt, located in the nodes' outbox listings.
TEST_F(LobbyTest, ReconcileClassifiesRoomsAgainstTheNodesOutboxes) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room : {51, 52, 53}) MustAllocate(lobby->port(), room);
  MustAllocate(lobby->port(), 54, "node-b");
  TempDir dir;
  const std::string listing = dir.Sub("node-a.json");
  std::ofstream(listing) << R"({"records":[
      {"room_id":"51","where":"shard-003","sequence":7,"reason":"pending","detail":""},
      {"room_id":"52","where":"dead-letter","sequence":8,"reason":"ROSTER_MISMATCH",
       "detail":"the roster differs"},
      {"room_id":"0","where":"quarantine","sequence":9,"reason":"undecodable","detail":""}],
      "complete":true})";
  const auto run = RunCommand({LobbyBinary(), "--db", db_->conninfo(), "reconcile", "--older-than",
                               "0", "--json", "--outbox", "node-a=" + listing});
  EXPECT_EQ(run.exit_code, 3) << "room 53 is lost, which the exit status must say";
  for (const char* expected :
       {R"("room_id":"51","node_id":"node-a")", R"("state":"pending")",
        R"("state":"dead-lettered","reason":"ROSTER_MISMATCH","detail":"the roster differs")",
        R"("room_id":"53","node_id":"node-a")", R"("state":"lost")",
        R"("room_id":"54","node_id":"node-b")", R"("state":"unchecked")",
        R"("counts":{"dead-lettered":1,"lost":1,"pending":1,"unchecked":1})"}) {
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " in " << run.out;
  }

  // Bad listings are refused with a reason, not half-used.
  std::ofstream(dir.Sub("cut.json")) << R"({"records":[],"complete":false})";
  std::ofstream(dir.Sub("junk.json")) << "{\"records\": [ {\"room_id\": {} ]";
  for (const std::string& bad :
       {"node-a=" + dir.Sub("cut.json"), "node-a=" + dir.Sub("junk.json"),
        "node-a=" + dir.Sub("missing.json"), std::string("no-equals-sign")}) {
    const auto refused = RunCommand({LobbyBinary(), "--db", db_->conninfo(), "reconcile",
                                     "--older-than", "0", "--outbox", bad});
    EXPECT_EQ(refused.exit_code, 1) << bad << ": " << refused.out;
  }
}

TEST_F(LobbyTest, ConcurrentMigrationsBothSucceedAndNewerSchemaIsRefused) {
  TestDatabase fresh;
  std::vector<std::thread> runs;
  std::vector<CommandResult> results(2);
  for (int i = 0; i < 2; ++i) {
    runs.emplace_back([&, i] {
      results[i] = RunCommand({LobbyBinary(), "--db", fresh.conninfo(), "migrate"});
    });
  }
  for (auto& t : runs) t.join();
  EXPECT_EQ(results[0].exit_code, 0) << results[0].out;
  EXPECT_EQ(results[1].exit_code, 0) << results[1].out;
  // Each migration and each function file applied once, by one of the two: "(N migrations and
  // M function files applied)" adds up.
  const auto applied = [](const std::string& out, const std::string& after) {
    const size_t at = out.find(after);
    return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + after.size());
  };
  const auto migrations = [&](const std::string& out) { return applied(out, "("); };
  const auto functions = [&](const std::string& out) { return applied(out, " and "); };
  EXPECT_EQ(fresh.Scalar("SELECT count(*) FROM verdict_schema_migrations"),
            fresh.Scalar("SELECT count(DISTINCT version) FROM verdict_schema_migrations"));
  EXPECT_EQ(std::to_string(migrations(results[0].out) + migrations(results[1].out)),
            fresh.Scalar("SELECT count(*) FROM verdict_schema_migrations"))
      << results[0].out << results[1].out;
  EXPECT_EQ(std::to_string(functions(results[0].out) + functions(results[1].out)),
            fresh.Scalar("SELECT count(*) FROM verdict_schema_functions"))
      << results[0].out << results[1].out;
  EXPECT_TRUE(migrations(results[0].out) == 0 || migrations(results[1].out) == 0);
  EXPECT_TRUE(functions(results[0].out) == 0 || functions(results[1].out) == 0);
  fresh.Exec("INSERT INTO verdict_schema_migrations (version, name) VALUES (999, 'future')");
  const auto refused = RunCommand({LobbyBinary(), "--db", fresh.conninfo(), "migrate"});
  EXPECT_NE(refused.exit_code, 0);
}

// The migrated schema carries no test-only switch: one verdict_settle_prepare, without the
// parameter that skipped its guard, and no function of the lobby's sleeps.
TEST_F(LobbyTest, MigratedSettlementHasNoTestSwitch) {
  const std::string switched =
      "SELECT count(*) FROM pg_proc WHERE proname LIKE 'verdict%' "
      "AND ('p_unsafe_skip_guard' = ANY (proargnames) OR prosrc LIKE '%pg_sleep%')";
  EXPECT_EQ(Q("SELECT count(*) FROM pg_proc WHERE proname = 'verdict_settle_prepare'"), "1");
  EXPECT_EQ(Q(switched), "0");
  // Negative control: the test-only settlement is what the query finds.
  db_->Exec(kUnguardedSettleSql);
  EXPECT_EQ(Q(switched), "1");
}

TEST_F(LobbyTest, SlowClientIsDisconnectedAndOthersAreServed) {
  auto lobby = StartLobby({"--read-timeout-ms", "500"});
  ASSERT_NE(lobby, nullptr);
  const int fd = ConnectRaw(lobby->port());
  ASSERT_GE(fd, 0);
  const std::string partial = "POST /v1/settlements HTTP/1.1\r\nHost: x\r\nContent-Le";
  ASSERT_EQ(::write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/healthz").status, 200);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[64];
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), 0) << "the lobby should close a stalled request";
  ::close(fd);
}

// A caller without a valid token is answered 401 from its request's header: the lobby neither
// waits for nor holds the body the header announces (3 MB here, never sent).
TEST_F(LobbyTest, UnauthenticatedRequestIsRefusedBeforeItsBodyIsRead) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const int fd = ConnectRaw(lobby->port());
  ASSERT_GE(fd, 0);
  const std::string head =
      "POST /v1/settlements HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer not-a-token\r\n"
      "Content-Type: application/json\r\nContent-Length: 3000000\r\n\r\n";
  ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  ASSERT_GT(n, 0) << "no answer before the body came";
  EXPECT_EQ(std::string(buf, n).rfind("HTTP/1.1 401", 0), 0u) << std::string(buf, n);
  // A valid token still has its (whole) request read and answered.
  EXPECT_EQ(
      HttpCall(lobby->port(), "GET", "/v1/players/1", {{"Authorization", "Bearer token-a"}}).status,
      404);
}

// Paths that need no body (health, metrics, readiness, the event feed, the GETs, unknown paths,
// wrong methods) are answered from the header, and a body announced is never read: with the
// body never sent, only an answer from the header can come back, and the lobby then closes.
TEST_F(LobbyTest, PathsThatReadNoBodyAreAnsweredFromTheHeader) {
  auto lobby = StartLobby({"--read-timeout-ms", "3000"});
  ASSERT_NE(lobby, nullptr);
  const struct {
    const char* method;
    const char* path;
    bool token;
    const char* status;
  } cases[] = {
      {"GET", "/healthz", false, "200"},       {"GET", "/metrics", false, "200"},
      {"GET", "/readyz", false, "200"},        {"POST", "/healthz", false, "405"},
      {"GET", "/v1/events", false, "401"},     {"GET", "/v1/events", true, "413"},
      {"GET", "/nowhere", false, "404"},       {"POST", "/nowhere", true, "404"},
      {"GET", "/v1/players/7", true, "413"},   {"GET", "/v1/settlements/7", true, "413"},
      {"GET", "/v1/settlements", true, "405"}, {"PUT", "/v1/rooms", true, "405"},
  };
  for (const auto& c : cases) {
    const int fd = ConnectRaw(lobby->port());
    ASSERT_GE(fd, 0);
    const std::string head = std::string(c.method) + " " + c.path + " HTTP/1.1\r\nHost: x\r\n" +
                             (c.token ? "Authorization: Bearer token-a\r\n" : "") +
                             "Content-Type: application/json\r\nContent-Length: 4000000\r\n\r\n";
    ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string answer;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, n);
    ::close(fd);
    EXPECT_EQ(answer.rfind(std::string("HTTP/1.1 ") + c.status, 0), 0u)
        << c.method << " " << c.path << ": " << answer.substr(0, answer.find("\r\n"));
    EXPECT_NE(answer.find("Connection: close"), std::string::npos)
        << c.method << " " << c.path << ": the body left unread must close the connection";
  }
}

// Ids are exact: a float-syntax id is refused, not rounded through a double to another room;
// ids from 2^63 up are 400 on every endpoint (not a database error 22003, logged per request);
// a key given twice is refused, not "last one wins".
TEST_F(LobbyTest, IdsAreExactAndOutOfRangeIdsAre400WithoutAnErrorLine) {
  TempDir dir;
  const std::string log = dir.Sub("lobby.log");
  auto lobby = LobbyProcess::Start(db_->conninfo(), {}, {}, "127.0.0.1:0", LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  const std::string seats = R"("seats":[{"player_id":1,"team":1},{"player_id":2,"team":2}])";
  for (const std::string& room :
       {std::string("123456789012345678.0"), std::string("1.2345678901234568e17"),
        std::string("\"9223372036854775808\""), std::string("18446744073709551615")}) {
    const auto r = HttpCall(port, "POST", "/v1/rooms", JsonHeaders("admin-token"),
                            R"({"room_id":)" + room + R"(,"node_id":"node-a",)" + seats + "}");
    EXPECT_EQ(r.status, 400) << room << ": " << r.body;
  }
  const auto twice = HttpCall(port, "POST", "/v1/rooms", JsonHeaders("admin-token"),
                              R"({"room_id":5,"room_id":6,"node_id":"node-a",)" + seats + "}");
  EXPECT_EQ(twice.status, 400) << twice.body;
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0");
  MustAllocate(port, 7);
  std::string result = wire::EncodeBody(MakeResult(7), wire::BodyFormat::kJson).value();
  result.replace(result.find("\"room_id\":\"7\""), 13, "\"room_id\":7.0");
  EXPECT_EQ(HttpCall(port, "POST", "/v1/settlements", JsonHeaders("token-a"), result).status, 400)
      << result;
  // Room ids are integers below 2^63; a player id is any 1 to 64 bytes of UTF-8 (percent-encoded
  // in a path), so one of 65 bytes, with a NUL or a malformed escape is what is refused.
  const std::string long_id = "/v1/players/" + std::string(65, 'p');
  for (const std::string& path :
       {std::string("/v1/settlements/9223372036854775808"), long_id,
        std::string("/v1/players/a%00b"), std::string("/v1/players/a%zz")}) {
    const auto r = HttpCall(port, "GET", path, {{"Authorization", "Bearer token-a"}});
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
  }
  EXPECT_EQ(Snapshot().matches, "0");
  std::ifstream logged(log);
  const std::string lines((std::istreambuf_iterator<char>(logged)), {});
  EXPECT_EQ(lines.find("[error]"), std::string::npos) << lines;
}

// A room action with an id that is not a room id is 400, as on every other endpoint, before the
// body is read; only an action that is not one is 404 (no such endpoint).
TEST_F(LobbyTest, RoomActionsWithAnInvalidIdAre400AndAnUnknownActionIs404) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 5);
  const DbSnapshot before = Snapshot();
  for (const std::string action : {"release", "abort"}) {
    for (const std::string id :
         {"0", "-1", "9223372036854775808", "18446744073709551616", "abc", "5x", ""}) {
      const std::string path = "/v1/rooms/" + id + ":" + action;
      const auto r = HttpCall(lobby->port(), "POST", path, JsonHeaders("admin-token"),
                              R"({"reason":"host_lost"})");
      EXPECT_EQ(r.status, 400) << path << ": " << r.body;
      EXPECT_NE(r.body.find("\"code\":\"INVALID_ARGUMENT\""), std::string::npos) << r.body;
    }
  }
  for (const char* path : {"/v1/rooms/5:frobnicate", "/v1/rooms/5", "/v1/rooms/0:frobnicate"}) {
    const auto r = HttpCall(lobby->port(), "POST", path, JsonHeaders("admin-token"), "{}");
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
  }
  EXPECT_EQ(Snapshot(), before);
}

// RFC 9110: the authentication scheme is case-insensitive.
TEST_F(LobbyTest, BearerSchemeIsReadInAnyCase) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (const char* auth :
       {"Bearer token-a", "bearer token-a", "BEARER token-a", "Bearer  token-a"}) {
    EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/players/1", {{"Authorization", auth}}).status,
              404)
        << auth;
  }
}

// A 503 says what failed, never libpq's text, which names the database's socket path (or host
// and port); the lobby's log has the detail.
TEST_F(LobbyTest, UnavailableAnswersNameNoDatabaseAddress) {
  TempDir dir;
  const std::string log = dir.Sub("lobby.log");
  const char* host = std::getenv("PGHOST");
  const char* pg_port = std::getenv("PGPORT");
  ASSERT_NE(host, nullptr);
  const std::string port = pg_port ? pg_port : "5432";
  auto lobby = LobbyProcess::Start(
      "host=" + std::string(host) + " port=" + port + " dbname=verdict_no_such_database", {}, {},
      "127.0.0.1:0", LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr);
  for (const HttpResponse& r :
       {HttpCall(lobby->port(), "GET", "/readyz"), Settle(lobby->port(), MakeResult(17))}) {
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.body.find(host), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find(port), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("verdict_no_such_database"), std::string::npos) << r.body;
  }
  std::ifstream logged(log);
  const std::string lines((std::istreambuf_iterator<char>(logged)), {});
  EXPECT_NE(lines.find("verdict_no_such_database"), std::string::npos) << lines;
}

TEST_F(LobbyTest, ConnectionsOverTheCapAreRefused) {
  auto lobby = StartLobby({"--max-connections", "2"});
  ASSERT_NE(lobby, nullptr);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    const int fd = ConnectRaw(lobby->port());
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  const HttpResponse refused = HttpCall(lobby->port(), "GET", "/healthz");
  EXPECT_EQ(refused.status, 503) << refused.error;
  for (int fd : held) ::close(fd);
}

// Out of file descriptors, accept fails while the connection waits in the backlog: the lobby
// pauses before accepting again instead of spinning on the failure (one log line a pause, not
// thousands), and serves again once descriptors are free. The lobby's limit is lowered to 48
// descriptors once it runs, and 60 connections are opened to it: started with 48, its listener's
// cap would be fitted below the limit (server/http_server.h, kReservedDescriptors) and accept
// would never run out.
TEST_F(LobbyTest, AcceptOutOfDescriptorsPausesThenServesAgain) {
  TempDir dir;
  const std::string log = dir.Sub("lobby.log");
  auto lobby = LobbyProcess::Start(db_->conninfo(), {}, {}, "127.0.0.1:0", LobbyBinary(), log);
  ASSERT_NE(lobby, nullptr);
  rlimit low{};
  ASSERT_EQ(::prlimit(lobby->pid(), RLIMIT_NOFILE, nullptr, &low), 0);
  low.rlim_cur = 48;
  ASSERT_EQ(::prlimit(lobby->pid(), RLIMIT_NOFILE, &low, nullptr), 0);
  const auto failed_accepts = [&] {
    std::ifstream in(log);
    size_t lines = 0;
    for (std::string line; std::getline(in, line);) {
      lines += line.find("accept failed") != std::string::npos;
    }
    return lines;
  };
  std::vector<int> held;
  for (int i = 0; i < 60; ++i) {
    const int fd = ConnectRaw(lobby->port());  // the kernel completes it even if not accepted
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  ASSERT_TRUE(WaitUntil([&] { return failed_accepts() > 0; })) << "accept never failed";
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const size_t in_two_seconds = failed_accepts();
  for (int fd : held) ::close(fd);
  EXPECT_LE(in_two_seconds, 40u) << "accept failures were retried without a pause";
  EXPECT_TRUE(WaitUntil([&] { return HttpCall(lobby->port(), "GET", "/healthz").status == 200; }))
      << "the lobby did not serve again once descriptors were free";
  EXPECT_TRUE(lobby->Running());
}

TEST_F(LobbyTest, SigtermStopsCleanly) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const int status = lobby->Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace verdict::testing
