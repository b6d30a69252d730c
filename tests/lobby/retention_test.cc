// Data over time, against a real PostgreSQL (docs/operating.md, "Retention" and "Pending
// settlement"; docs/events.md): the answers a result gets once its history, then its receipt, are
// past retention; room ids that are never allocated again; the feed's cursor refusals; the DEFAULT
// partition as a safety net; players released to a pending settlement and the compensation rule;
// rooms aborted by an operator; and reconciliation completed. Partitions are made tiny (two ids)
// so that a handful of settlements fills them.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "lobby/retention.h"
#include "tests/lobby/lobby_fixture.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;

// Two ids per partition.
const std::vector<std::string> kTinyPartitions = {"--events-per-partition", "2",
                                                  "--matches-per-partition", "2"};

class RetentionTest : public LobbyFixture {
 protected:
  // Drops every partition `migrate` (or a lobby) made ahead of the rows, as if none had been
  // made: the next ones are made with the sizes given then.
  void DropPartitionsAhead() {
    db_->Exec(R"(
        DO $$ DECLARE p record; t record; BEGIN
          FOR p IN SELECT * FROM verdict_partitions WHERE lower_id > 0 LOOP
            FOR t IN SELECT * FROM verdict_partition_tables(p.family) LOOP
              EXECUTE format('DROP TABLE %I', t.parent || '_p' || p.lower_id);
            END LOOP;
          END LOOP;
          DELETE FROM verdict_partitions WHERE lower_id > 0;
        END $$)");
  }

  // A lobby making tiny partitions ahead every `interval`, on a database without any yet.
  std::unique_ptr<LobbyProcess> StartTinyLobby(const std::string& interval = "100ms") {
    DropPartitionsAhead();
    std::vector<std::string> args = kTinyPartitions;
    args.insert(args.end(), {"--maintenance-interval", interval});
    return StartLobby(args);
  }

  // One `verdict-lobby retain` pass with tiny partitions and `args`; its exit code must be 0.
  std::string Retain(std::vector<std::string> args, const std::string& binary = LobbyBinary()) {
    std::vector<std::string> argv = {binary, "--db", db_->conninfo(), "retain"};
    argv.insert(argv.end(), kTinyPartitions.begin(), kTinyPartitions.end());
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult run = RunCommand(argv);
    EXPECT_EQ(run.exit_code, 0) << run.out;
    return run.out;
  }

  // Waits until the lobby has given every event its place in the feed.
  bool AllNumbered() {
    return WaitUntil(
        [&] { return Q("SELECT count(*) FROM settlement_events WHERE seq IS NULL") == "0"; });
  }
};

// A redelivery after the room's history (match, players, replay, event) is dropped is still
// answered from the receipt: a duplicate with the original match id, alone and in a batch.
TEST_F(RetentionTest, RedeliveryAfterTheHistoryIsDroppedIsADuplicateOfTheOriginalMatch) {
  auto lobby = StartTinyLobby();
  ASSERT_NE(lobby, nullptr);
  const uint64_t match = AllocateAndSettle(lobby->port(), 1);
  for (uint64_t room : {2, 3, 4}) AllocateAndSettle(lobby->port(), room);
  ASSERT_TRUE(AllNumbered());
  const std::string out = Retain({"--events-older-than", "0s", "--history-older-than", "0s"});
  EXPECT_NE(out.find("history partitions dropped"), std::string::npos) << out;
  EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE room_id = 1"), "0") << out;
  EXPECT_EQ(Q("SELECT count(*) FROM match_players WHERE match_id = " + std::to_string(match)), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events WHERE room_id = 1"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts WHERE room_id = 1"), "1");
  const DbSnapshot before = Snapshot();

  const HttpResponse again = Settle(lobby->port(), MakeResult(1));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(Receipt(again).duplicate());
  EXPECT_EQ(Receipt(again).match_id(), match);
  const auto items = Items(PostBatch(lobby->port(), {MakeResult(1)}));
  ASSERT_EQ(items.items_size(), 1);
  EXPECT_EQ(CodeOf(items.items(0)), "DUPLICATE");
  EXPECT_EQ(items.items(0).receipt().match_id(), match);
  EXPECT_EQ(Snapshot(), before) << "a redelivery changed something";
}

// `retain` without window flags keeps its defaults: events go once a whole partition of them is
// older than seven days; the history and the receipts are kept.
TEST_F(RetentionTest, RetainWithoutWindowFlagsDropsOnlyEventsOlderThanSevenDays) {
  auto lobby = StartTinyLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room : {101, 102, 103, 104}) AllocateAndSettle(lobby->port(), room);
  ASSERT_TRUE(AllNumbered());
  Retain({});
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "4") << "events of today were dropped";
  db_->Exec(
      "UPDATE settlement_events SET created_at = now() - interval '8 days';"
      "UPDATE matches SET settled_at = now() - interval '8 days';"
      "UPDATE settlement_receipts SET settled_at = now() - interval '8 days'");
  const std::string out = Retain({});
  EXPECT_EQ(Q("SELECT trimmed_through FROM verdict_feed"), "4") << out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "0") << out;
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "4") << "the history is kept by default";
  EXPECT_EQ(Q("SELECT count(*) FROM match_players"), "40");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "4") << "receipts are kept by default";
  EXPECT_EQ(Q("SELECT count(*) FROM settled_rooms"), "0");
}

// Once the receipt is expired too, the compact record answers: 410 ORIGINAL_EXPIRED, not
// retryable, alone, in a batch and on GET; another node's token still meets ROOM_UNKNOWN; and a
// node holding the result acks it as delivered instead of dead-lettering it.
TEST_F(RetentionTest, RedeliveryAfterTheReceiptExpiredIsOriginalExpiredAndTheNodeAcksIt) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  AllocateAndSettle(lobby->port(), 11);
  const std::string out = Retain({"--receipts-older-than", "0s"});
  EXPECT_NE(out.find("1 receipts expired"), std::string::npos) << out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM settled_rooms WHERE room_id = 11"), "1");
  const DbSnapshot before = Snapshot();

  const HttpResponse single = Settle(lobby->port(), MakeResult(11));
  EXPECT_EQ(single.status, 410) << single.body;
  EXPECT_EQ(Member(single, "code"), "ORIGINAL_EXPIRED");
  EXPECT_NE(single.body.find("\"retryable\":false"), std::string::npos) << single.body;
  const auto items = Items(PostBatch(lobby->port(), {MakeResult(11), MakeResult(12)}));
  ASSERT_EQ(items.items_size(), 2);
  EXPECT_EQ(CodeOf(items.items(0)), "ORIGINAL_EXPIRED");
  EXPECT_EQ(items.items(0).problem().status(), 410u);
  EXPECT_FALSE(items.items(0).problem().retryable());
  EXPECT_EQ(CodeOf(items.items(1)), "ROOM_UNKNOWN");
  const auto get =
      HttpCall(lobby->port(), "GET", "/v1/settlements/11", {{"Authorization", "Bearer token-a"}});
  EXPECT_EQ(get.status, 410) << get.body;
  // Node b's room or an unknown one: the same answer, so a compact record leaks nothing.
  const HttpResponse other =
      Settle(lobby->port(), MakeResult(11, 1'700'000'000'000, "node-b"), "token-b");
  const HttpResponse unknown =
      Settle(lobby->port(), MakeResult(13, 1'700'000'000'000, "node-b"), "token-b");
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(other.body, unknown.body);

  TempDir dir;
  const std::string outbox = dir.Sub("outbox"), file = dir.Sub("result.json");
  std::ofstream(file) << wire::EncodeBody(MakeResult(11), wire::BodyFormat::kJson).value();
  ASSERT_EQ(RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, file}).exit_code, 0);
  const CommandResult run =
      RunCommand({NodeBinary(), "run", "--node-id", "node-a", "--outbox", outbox, "--lobby",
                  "http://127.0.0.1:" + std::to_string(lobby->port()), "--token", "token-a",
                  "--exit-when-drained"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  const auto stats = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "stats", "--json"});
  EXPECT_NE(stats.out.find("\"records\":0,"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("\"dead_lettered\":0,"), std::string::npos) << stats.out;
  EXPECT_EQ(Snapshot(), before) << "a redelivery changed something";
}

// A room id that was ever settled is never allocated again: not while its receipt is there, and
// not once only its compact record is.
TEST_F(RetentionTest, AllocatingASettledRoomIdIsRoomIdReused) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  AllocateAndSettle(lobby->port(), 21);
  HttpResponse r = Allocate(lobby->port(), 21);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Member(r, "code"), "ROOM_ID_REUSED");
  Retain({"--receipts-older-than", "0s"});
  r = Allocate(lobby->port(), 21);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Member(r, "code"), "ROOM_ID_REUSED");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0");
}

// Negative control: receipts expired without their compact records. The room id is allocated
// again, and the old result, redelivered late, settles a second time: the ratings move twice.
TEST_F(RetentionTest, NegativeControlExpiringReceiptsWithoutRecordsSettlesALateResultTwice) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint64_t first = AllocateAndSettle(lobby->port(), 31);
  Retain({"--receipts-older-than", "0s", "--unsafe-expire-receipts-without-records"},
         LobbyTestingBinary());
  EXPECT_EQ(Q("SELECT count(*) FROM settled_rooms"), "0");
  ASSERT_EQ(Allocate(lobby->port(), 31).status, 201) << "the room id was allocated again";
  const HttpResponse late = Settle(lobby->port(), MakeResult(31));
  ASSERT_EQ(late.status, 200) << late.body;
  EXPECT_FALSE(Receipt(late).duplicate());
  EXPECT_NE(Receipt(late).match_id(), first);
  EXPECT_EQ(Q("SELECT max(games) FROM player_ratings"), "2") << "the double settlement went unseen";
}

// The feed refuses a cursor it cannot continue from before the upgrade: beyond the head
// (CURSOR_AHEAD), from another epoch (EPOCH_CHANGED, also after `new-epoch`), below what
// retention kept (CURSOR_TRIMMED, ?after=0 included), each saying where the feed stands; a
// cursor it can continue from is upgraded and gets the rest in order, with the epoch.
TEST_F(RetentionTest, EventCursorsTheFeedCannotContinueAreRefusedBeforeTheUpgrade) {
  auto lobby = StartTinyLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 41; room <= 44; ++room) AllocateAndSettle(lobby->port(), room);
  ASSERT_TRUE(AllNumbered());
  const std::string epoch = Q("SELECT epoch FROM verdict_feed");

  HttpResponse r = Subscribe(lobby->port(), "?after=5");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Member(r, "code"), "CURSOR_AHEAD");
  EXPECT_EQ(Member(r, "feed.head_event_id"), "4");
  EXPECT_EQ(Member(r, "feed.epoch"), epoch);
  r = Subscribe(lobby->port(), "?after=3&epoch=0123456789abcdef");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Member(r, "code"), "EPOCH_CHANGED");
  EXPECT_EQ(Subscribe(lobby->port(), "?after=4&epoch=" + epoch).status, 101);
  EXPECT_EQ(Subscribe(lobby->port(), "?after=0").status, 101);
  EXPECT_EQ(Subscribe(lobby->port(), "?epoch=not-hex").status, 400);

  // Events 1..4 fill two partitions of two, both past: dropped. 5 and 6 come after.
  const std::string out = Retain({"--events-older-than", "0s"});
  EXPECT_EQ(Q("SELECT trimmed_through FROM verdict_feed"), "4") << out;
  for (uint64_t room : {45, 46}) AllocateAndSettle(lobby->port(), room);
  ASSERT_TRUE(AllNumbered());
  for (const std::string query : {"?after=0", "?after=3"}) {
    r = Subscribe(lobby->port(), query);
    EXPECT_EQ(r.status, 410) << query << ": " << r.body;
    EXPECT_EQ(Member(r, "code"), "CURSOR_TRIMMED");
    EXPECT_EQ(Member(r, "feed.trimmed_through"), "4");
    EXPECT_EQ(Member(r, "feed.oldest_event_id"), "5");
    EXPECT_EQ(Member(r, "feed.head_event_id"), "6");
  }
  // From the trim mark on, every event retained arrives once, in order, with the epoch.
  WsClient reader;
  ASSERT_TRUE(reader.Connect(lobby->port(), "/v1/events?after=4&epoch=" + epoch, "admin-token"))
      << reader.error();
  for (int id = 5; id <= 6; ++id) {
    const auto message = reader.Read(10s);
    ASSERT_TRUE(message.has_value()) << "event " << id;
    EXPECT_TRUE(message->starts_with("{\"event_id\":\"" + std::to_string(id) + "\",\"epoch\":\"" +
                                     epoch + "\",\"event\":{"))
        << *message;
  }

  const CommandResult renewed = RunCommand({LobbyBinary(), "--db", db_->conninfo(), "new-epoch"});
  ASSERT_EQ(renewed.exit_code, 0) << renewed.out;
  EXPECT_NE(Q("SELECT epoch FROM verdict_feed"), epoch);
  r = Subscribe(lobby->port(), "?after=6&epoch=" + epoch);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Member(r, "code"), "EPOCH_CHANGED");
  EXPECT_EQ(Member(r, "feed.epoch"), Q("SELECT epoch FROM verdict_feed"));
}

// A node's token is judged, and told where the feed stands, by the places of its own events
// only: its head is its newest event, and a cursor beyond it is CURSOR_AHEAD even where other
// nodes' events go on, so that neither the answer nor the problem tells a node how many events the
// others had (docs/design.md §8). The admin token sees the whole feed.
TEST_F(RetentionTest, ANodesCursorIsJudgedByItsOwnEventsAndShowsNoOtherNodesCount) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  AllocateAndSettle(lobby->port(), 151);   // node a: place 1
  for (uint64_t room : {152, 153, 154}) {  // node b: places 2..4
    MustAllocate(lobby->port(), room, "node-b");
    ASSERT_EQ(
        Settle(lobby->port(), MakeResult(room, 1'700'000'000'000, "node-b"), "token-b").status,
        200);
  }
  ASSERT_TRUE(AllNumbered());

  EXPECT_EQ(Subscribe(lobby->port(), "?after=1", "token-a").status, 101);
  for (const std::string after : {"2", "4", "1000"}) {
    const HttpResponse r = Subscribe(lobby->port(), "?after=" + after, "token-a");
    EXPECT_EQ(r.status, 409) << after << ": " << r.body;
    EXPECT_EQ(Member(r, "code"), "CURSOR_AHEAD");
    EXPECT_EQ(Member(r, "feed.head_event_id"), "1") << r.body;
    EXPECT_EQ(Member(r, "feed.oldest_event_id"), "1") << r.body;
    EXPECT_NE(Member(r, "detail").find("its head 1,"), std::string::npos) << r.body;
  }
  HttpResponse r = Subscribe(lobby->port(), "?after=5", "token-b");
  EXPECT_EQ(Member(r, "feed.head_event_id"), "4") << r.body;
  EXPECT_EQ(Member(r, "feed.oldest_event_id"), "2") << r.body;
  r = Subscribe(lobby->port(), "?after=5");
  EXPECT_EQ(Member(r, "code"), "CURSOR_AHEAD");
  EXPECT_EQ(Member(r, "feed.head_event_id"), "4") << r.body;
  EXPECT_EQ(Member(r, "feed.oldest_event_id"), "1") << r.body;
}

// Without ?after= the feed starts at the beginning of what it holds, also once retention dropped
// events (docs/events.md); an explicit cursor below the trim mark, ?after=0 included,
// is still refused.
TEST_F(RetentionTest, WithoutAfterTheFeedStartsAtTheOldestEventRetained) {
  auto lobby = StartTinyLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 141; room <= 144; ++room) AllocateAndSettle(lobby->port(), room);
  ASSERT_TRUE(AllNumbered());
  // Events 1..4 fill two partitions of two, both past: dropped. 5 and 6 come after.
  const std::string out = Retain({"--events-older-than", "0s"});
  ASSERT_EQ(Q("SELECT trimmed_through FROM verdict_feed"), "4") << out;
  for (uint64_t room : {145, 146}) AllocateAndSettle(lobby->port(), room);
  ASSERT_TRUE(AllNumbered());

  EXPECT_EQ(Subscribe(lobby->port(), "?after=0").status, 410);
  EXPECT_EQ(Subscribe(lobby->port(), "").status, 101);
  for (const std::string token : {"admin-token", "token-a"}) {
    WsClient reader;
    ASSERT_TRUE(reader.Connect(lobby->port(), "/v1/events", token)) << reader.error();
    for (int id = 5; id <= 6; ++id) {
      const auto message = reader.Read(10s);
      ASSERT_TRUE(message.has_value()) << token << ": event " << id << " never came";
      EXPECT_TRUE(message->starts_with("{\"event_id\":\"" + std::to_string(id) + "\","))
          << *message;
    }
  }
}

// Windows longer than the calendar can hold (now() minus ten million days is before 4713 BC) are
// refused as the flags are read, naming the longest accepted; they used to parse and then fail
// every pass with "timestamp out of range". The longest accepted works, in a pass and in serve.
TEST_F(RetentionTest, WindowsBeyondTheCalendarAreRefusedAsTheyAreReadNamingTheLongest) {
  for (const std::string flag :
       {"--events-older-than", "--history-older-than", "--receipts-older-than"}) {
    const ExitAndOutput run =
        RunToExit({LobbyBinary(), "--db", db_->conninfo(), "retain", flag, "10000000d"});
    EXPECT_EQ(run.code, 1) << flag << ": " << run.output;
    EXPECT_NE(run.output.find(flag + ": '10000000d' is longer than 36500d, the longest accepted"),
              std::string::npos)
        << run.output;
  }
  TempDir dir;
  for (const std::string flag : {"--release-after", "--retain-every", "--maintenance-interval"}) {
    const std::string log = dir.Sub(flag.substr(2) + ".log");
    auto serve = ChildProcess::Start({LobbyBinary(), "--db", db_->conninfo(), "serve", "--listen",
                                      "127.0.0.1:0", flag, "10000000d"},
                                     {}, log);
    ASSERT_NE(serve, nullptr);
    ASSERT_TRUE(serve->WaitFor(20s)) << flag << " 10000000d: serve took it and runs";
    EXPECT_EQ(serve->exit_code(), 1);
    std::ifstream in(log);
    const std::string said((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(said.find(flag + ": '10000000d' is longer than 36500d, the longest accepted"),
              std::string::npos)
        << said;
  }

  const std::vector<std::string> longest = {"--events-older-than",   "36500d",
                                            "--history-older-than",  "36500d",
                                            "--receipts-older-than", "36500d"};
  const std::string out = Retain(longest);
  EXPECT_EQ(out.find("failed"), std::string::npos) << out;
  std::vector<std::string> serve_args = longest;
  serve_args.insert(serve_args.end(), {"--release-after", "36500d", "--retain-every", "36500d",
                                       "--maintenance-interval", "36500d"});
  auto lobby = StartLobby(serve_args);
  ASSERT_NE(lobby, nullptr);
  // The first tick releases, then runs a retention pass, whose counters appear once it is done.
  std::string metrics;
  ASSERT_TRUE(WaitUntil([&] {
    metrics = HttpCall(lobby->port(), "GET", "/metrics").body;
    return metrics.find("verdict_lobby_retention_partitions_dropped_total{") != std::string::npos;
  }));
  EXPECT_EQ(metrics.find("verdict_lobby_maintenance_failures_total{"), std::string::npos)
      << metrics;
}

// One window that fails (here one beyond the calendar, which the flags no longer let through)
// does not stop the others in the same pass: the receipts still expire, and the pass says which
// step failed and why.
TEST_F(RetentionTest, AWindowThatFailsDoesNotStopTheOthersInThePass) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  AllocateAndSettle(lobby->port(), 61);
  lobby::RetentionOptions options;
  options.events_older_than = std::chrono::hours(24 * 10'000'000);
  options.receipts_older_than = 0s;
  const auto report = lobby::RetainOnce({.conninfo = db_->conninfo()}, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->receipts_expired, 1) << report->ToString();
  EXPECT_EQ(Q("SELECT count(*) FROM settled_rooms WHERE room_id = 61"), "1");
  ASSERT_EQ(report->steps_failed.size(), 1u) << report->ToString();
  EXPECT_TRUE(
      report->steps_failed[0].starts_with("detaching events: database error SQLSTATE 22008"))
      << report->steps_failed[0];
  EXPECT_NE(report->ToString().find("1 steps failed"), std::string::npos) << report->ToString();
}

// The partitions a settlement needs are missing (maintenance has not run): the DEFAULT partition
// takes the rows, nothing fails, and the next maintenance moves them into partitions of their own.
TEST_F(RetentionTest, AMissingPartitionNeverFailsASettlement) {
  auto lobby = StartTinyLobby("1h");
  ASSERT_NE(lobby, nullptr);
  // Once the lobby's first maintenance has made both families' partitions, they go.
  ASSERT_TRUE(WaitUntil([&] {
    return Q("SELECT count(DISTINCT family) FROM verdict_partitions WHERE lower_id > 0") == "2";
  }));
  DropPartitionsAhead();
  for (uint64_t room : {51, 52, 53}) AllocateAndSettle(lobby->port(), room);
  EXPECT_EQ(Q("SELECT count(*) FROM matches_default"), "3");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events_default"), "3");
  Retain({"--events-older-than", "off"});
  EXPECT_EQ(Q("SELECT count(*) FROM matches_default"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM match_players_default"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events_default"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "3");
  EXPECT_EQ(Q("SELECT count(*) FROM match_players"), "30");
  EXPECT_EQ(Settle(lobby->port(), MakeResult(52)).status, 200);
}

// Retention never drops an event that has no place in the feed yet (nobody can have had it), and
// the places handed out after a trim continue above everything trimmed.
TEST_F(RetentionTest, EventsWithoutTheirPlaceInTheFeedAreNeverDropped) {
  DropPartitionsAhead();
  db_->Exec("SELECT verdict_ensure_partitions('events', 2, 2)");
  const auto insert_events = [&](int n) {
    db_->Exec(
        "INSERT INTO settlement_events (room_id, node_id, match_id, payload, created_at) "
        "SELECT g, 'node-a', g, '{}', now() - interval '1 hour' FROM generate_series(1, " +
        std::to_string(n) + ") g");
  };
  insert_events(3);  // ids 1, 2 fill the first partition; 3 opens the next
  Retain({"--events-older-than", "1s"});
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "3") << "unnumbered events were dropped";
  db_->Exec("SELECT verdict_sequence_events(100)");
  Retain({"--events-older-than", "1s"});
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "1");
  EXPECT_EQ(Q("SELECT trimmed_through FROM verdict_feed"), "2");
  db_->Exec("DELETE FROM settlement_events");  // as if all were trimmed
  insert_events(1);
  db_->Exec("SELECT verdict_sequence_events(100)");
  EXPECT_EQ(Q("SELECT seq FROM settlement_events"), "3") << "a place was handed out twice";
}

// Migration 006: payloads are compressed by lz4, in the partitions migrate made and in those made
// after it, and an event over the 2 kB threshold is written so.
TEST_F(RetentionTest, EventPayloadsAreCompressedByLz4InEveryPartitionOldAndNew) {
  DropPartitionsAhead();
  db_->Exec("SELECT verdict_ensure_partitions('events', 2, 3)");
  const std::string not_lz4 =
      "SELECT count(*) FROM pg_attribute a WHERE a.attname = 'payload' AND a.attcompression <> 'l'"
      " AND a.attrelid IN (SELECT 'settlement_events'::regclass UNION ALL SELECT inhrelid FROM"
      " pg_inherits WHERE inhparent = 'settlement_events'::regclass)";
  EXPECT_EQ(Q(not_lz4), "0");
  EXPECT_GE(std::stoi(Q("SELECT count(*) FROM pg_inherits "
                        "WHERE inhparent = 'settlement_events'::regclass")),
            4);  // the first, the default, and those ahead
  db_->Exec(
      "INSERT INTO settlement_events (room_id, node_id, match_id, payload) "
      "SELECT g, 'node-a', g, jsonb_build_object('players', (SELECT jsonb_agg(jsonb_build_object("
      "'player_id', 'p' || i, 'rating_before', i * 1.25)) FROM generate_series(1, 100) i)) "
      "FROM generate_series(1, 5) g");
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT pg_column_compression(payload), ',') "
              "FROM settlement_events"),
            "lz4");
}

// A partition goes in two transactions: detached under the family's locks, then its tables
// dropped, each locking only itself. A pass that ended in between (here the first half run by
// hand) leaves detached tables, which no query of the family reads, and the next pass drops them
// whatever its windows.
TEST_F(RetentionTest, TablesAPassDetachedButDidNotDropAreDroppedByTheNext) {
  DropPartitionsAhead();
  db_->Exec("SELECT verdict_ensure_partitions('events', 2, 3)");
  db_->Exec(
      "INSERT INTO settlement_events (room_id, node_id, match_id, payload, created_at, seq) "
      "SELECT g, 'node-a', g, '{}', now() - interval '1 hour', g FROM generate_series(1, 5) g");
  const std::string detached =
      "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
      "WHERE relname ~ '^settlement_events_p[0-9]+$' AND NOT relispartition";
  // Events 1, 2 and 3, 4 fill two partitions, both past, after the empty first one; 5 opens the
  // next, which stays.
  EXPECT_EQ(Q("SELECT verdict_detach_old_partitions('events', now(), 16)"), "3");
  EXPECT_EQ(Q(detached), "settlement_events_p0,settlement_events_p1,settlement_events_p3");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "1");
  EXPECT_EQ(Q("SELECT trimmed_through FROM verdict_feed"), "4");
  EXPECT_EQ(Q("SELECT string_agg(lower_id::text, ',' ORDER BY lower_id) FROM verdict_partitions "
              "WHERE family = 'events'"),
            "5");
  const std::string out = Retain({"--events-older-than", "off"});
  EXPECT_EQ(Q(detached), "") << out;
  EXPECT_NE(out.find("(3 tables)"), std::string::npos) << out;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "1") << "an attached partition went";
}

// Pending settlement: the room's players are released and play another match; the room's late
// result still settles, rated on the ratings recorded at allocation and added to the current
// ones (the compensation rule).
TEST_F(RetentionTest, ReleasedRoomStillSettlesItsLateResultByTheCompensationRule) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 61);  // players 611..615 against 616..620
  const auto path = [](uint64_t room, const char* action) {
    return "/v1/rooms/" + std::to_string(room) + ":" + action;
  };
  EXPECT_EQ(HttpCall(lobby->port(), "POST", path(61, "release"), JsonHeaders("token-a")).status,
            401);
  EXPECT_EQ(HttpCall(lobby->port(), "POST", path(69, "release"), JsonHeaders("admin-token")).status,
            404);
  HttpResponse r = HttpCall(lobby->port(), "POST", path(61, "release"), JsonHeaders("admin-token"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"players_released\":10"), std::string::npos) << r.body;
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms WHERE released_at IS NOT NULL"), "1");
  r = HttpCall(lobby->port(), "POST", path(61, "release"), JsonHeaders("admin-token"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"players_released\":0"), std::string::npos) << "freed again: " << r.body;

  // Meanwhile 611..615 win another match against fresh players: 1516 each.
  v1::RoomAllocation other = MakeAllocation(62, "node-a", 900, 10);
  for (int i = 0; i < 5; ++i) other.mutable_seats(i)->set_player_id(std::to_string(611 + i));
  ASSERT_EQ(AllocateRoster(lobby->port(), other).status, 201);
  ASSERT_EQ(Settle(lobby->port(), ResultOf(other, 1)).status, 200);
  EXPECT_EQ(
      Q("SELECT string_agg(DISTINCT rating::text, ',') FROM player_ratings WHERE player_id::int "
        "BETWEEN 611 AND 615"),
      "1516");

  // Room 61's result, late: team 1 (611..615) won. Rated at allocation, 1500 against 1500:
  // +16 and -16, added to 1516 and 1500. (Rated on current ratings it would be +15 and -15.)
  r = Settle(lobby->port(), MakeResult(61));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(Receipt(r).duplicate());
  EXPECT_EQ(
      Q("SELECT string_agg(DISTINCT rating::text, ',') FROM player_ratings WHERE player_id::int "
        "BETWEEN 611 AND 615"),
      "1532");
  EXPECT_EQ(
      Q("SELECT string_agg(DISTINCT rating::text, ',') FROM player_ratings WHERE player_id::int "
        "BETWEEN 616 AND 620"),
      "1484");
  const std::string match = std::to_string(Receipt(r).match_id());
  EXPECT_EQ(Q("SELECT min(rating_before) || '..' || max(rating_after) FROM match_players WHERE "
              "match_id = " +
              match + " AND player_id::int <= 615"),
            "1516..1532");
  EXPECT_EQ(
      Q("SELECT sum(rating_after - rating_before) FROM match_players WHERE match_id = " + match),
      "0");
  EXPECT_EQ(Q("SELECT max(games) FROM player_ratings"), "2");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0");
}

// --release-after releases rooms held longer than that on its own.
TEST_F(RetentionTest, ReleaseAfterFreesThePlayersOfRoomsHeldTooLong) {
  auto lobby = StartLobby({"--release-after", "1s", "--maintenance-interval", "100ms"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 71);
  ASSERT_TRUE(WaitUntil([&] {
    return Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0") == "0";
  }));
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms WHERE released_at IS NOT NULL"), "1");
  ASSERT_EQ(Settle(lobby->port(), MakeResult(71)).status, 200);
  EXPECT_TRUE(WaitUntil([&] {
    return MetricValue(HttpCall(lobby->port(), "GET", "/metrics").body,
                       "verdict_lobby_rooms_auto_released_total") == 1;
  }));
}

// An operator aborts a room whose host is gone: settled as ABORTED with a receipt (the same abort
// again is a duplicate); the node's late result is then refused as final, OUTCOME_CONFLICT, and
// the node dead-letters it: never a silent second settlement.
TEST_F(RetentionTest, AbortedRoomRefusesItsLateResultIntoTheNodesDeadLetter) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 81);
  const std::string abort_path = "/v1/rooms/81:abort";
  EXPECT_EQ(HttpCall(lobby->port(), "POST", abort_path, JsonHeaders("admin-token"), "{}").status,
            400)
      << "a reason is required";
  HttpResponse r = HttpCall(lobby->port(), "POST", abort_path, JsonHeaders("admin-token"),
                            R"({"reason":"host_lost"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Receipt(r).outcome(), v1::ABORTED);
  EXPECT_FALSE(Receipt(r).duplicate());
  EXPECT_EQ(Q("SELECT abort_reason FROM matches WHERE room_id = 81"), "host_lost");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  r = HttpCall(lobby->port(), "POST", abort_path, JsonHeaders("admin-token"),
               R"({"reason":"host_lost"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(Receipt(r).duplicate());
  const DbSnapshot before = Snapshot();

  const HttpResponse late = Settle(lobby->port(), MakeResult(81));
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_EQ(Member(late, "code"), "OUTCOME_CONFLICT");
  TempDir dir;
  const std::string outbox = dir.Sub("outbox"), file = dir.Sub("result.json");
  std::ofstream(file) << wire::EncodeBody(MakeResult(81), wire::BodyFormat::kJson).value();
  ASSERT_EQ(RunCommand({NodeBinary(), "enqueue", "--outbox", outbox, file}).exit_code, 0);
  const CommandResult run =
      RunCommand({NodeBinary(), "run", "--node-id", "node-a", "--outbox", outbox, "--lobby",
                  "http://127.0.0.1:" + std::to_string(lobby->port()), "--token", "token-a",
                  "--exit-when-drained"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  const auto ls = RunCommand({NodeBinary(), "outbox", "--outbox", outbox, "ls", "--json"});
  EXPECT_NE(ls.out.find(R"("room_id":"81","where":"dead-letter")"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(R"("reason":"OUTCOME_CONFLICT")"), std::string::npos) << ls.out;
  EXPECT_EQ(Snapshot(), before);
}

// A late SETTLED result of a room an operator aborted is a conflict, and stays one once the
// receipt expired: 409 OUTCOME_CONFLICT (a dead letter an operator sees), never 410
// ORIGINAL_EXPIRED, which a node takes for delivered. A redelivery of the abort itself is 410.
TEST_F(RetentionTest, ALateResultOfAnAbortedRoomIsAConflictBeforeAndAfterItsReceiptExpires) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 85);
  ASSERT_EQ(HttpCall(lobby->port(), "POST", "/v1/rooms/85:abort", JsonHeaders("admin-token"),
                     R"({"reason":"host_lost"})")
                .status,
            200);
  EXPECT_EQ(Member(Settle(lobby->port(), MakeResult(85)), "code"), "OUTCOME_CONFLICT");
  Retain({"--receipts-older-than", "0s"});
  ASSERT_EQ(Q("SELECT count(*) FROM settled_rooms WHERE room_id = 85 AND aborted"), "1");

  const HttpResponse late = Settle(lobby->port(), MakeResult(85));
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_EQ(Member(late, "code"), "OUTCOME_CONFLICT");
  v1::BattleResult abort = MakeResult(85);
  abort.set_outcome(v1::ABORTED);
  abort.set_winner_team(0);
  EXPECT_EQ(Member(Settle(lobby->port(), abort), "code"), "ORIGINAL_EXPIRED");
}

// A redelivery whose receipt expires while its settlement runs is answered with the receipt the
// settlement read: its original match (or 410 had it found the record), never a 2xx with match 0.
// (The guard read the receipt in one statement and the answer read it again in a later one.) A
// test-only check that sleeps holds the settlement between its read of the receipt and its end
// while retention expires the receipt.
TEST_F(RetentionTest, ARedeliveryRacingItsReceiptsExpiryIsAnsweredWithTheOriginalMatch) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint64_t match = AllocateAndSettle(lobby->port(), 86);
  // The live check, renamed, behind one of the same signature that sleeps first.
  db_->Exec(R"(
      DO $$ DECLARE f regprocedure; args text; names text; BEGIN
        SELECT p.oid::regprocedure, pg_get_function_identity_arguments(p.oid),
               array_to_string(p.proargnames, ', ')
        INTO f, args, names FROM pg_proc p WHERE p.proname = 'verdict_settle_check';
        EXECUTE format('ALTER FUNCTION %s RENAME TO test_settle_check_live', f);
        EXECUTE format('CREATE FUNCTION verdict_settle_check(%s) RETURNS text[] LANGUAGE plpgsql '
                       'AS $f$ BEGIN PERFORM pg_sleep(2); '
                       'RETURN test_settle_check_live(%s); END $f$', args, names);
      END $$)");
  HttpResponse redelivered;
  std::thread redelivery([&] { redelivered = Settle(lobby->port(), MakeResult(86)); });
  const bool sleeping = WaitUntil([&] {
    return Q("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
             "wait_event = 'PgSleep'") == "1";
  });
  if (sleeping) Retain({"--receipts-older-than", "0s"});
  redelivery.join();
  ASSERT_TRUE(sleeping) << "the redelivery never reached the check";
  ASSERT_EQ(Q("SELECT count(*) FROM settled_rooms WHERE room_id = 86"), "1");
  ASSERT_EQ(redelivered.status, 200) << redelivered.body;
  EXPECT_TRUE(Receipt(redelivered).duplicate());
  EXPECT_EQ(Receipt(redelivered).match_id(), match) << redelivered.body;
}

// `serve --release-after` releases room by room: a due room whose row another transaction holds
// is passed over until the lock goes, never holding up the others. (One statement released them
// all, and one locked row made it fail on its lock timeout at every tick.) A release writes no
// player's row (migration 005), so a player's row locked elsewhere holds up nothing at all.
TEST_F(RetentionTest, ReleaseAfterPassesOverALockedRoomAndNoPlayerLockHoldsItUp) {
  auto lobby = StartLobby({"--maintenance-interval", "100ms", "--lock-timeout-ms", "500"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 87);  // players 871..880
  MustAllocate(lobby->port(), 88);  // players 881..890
  auto blocker = db_->Connect();
  pqxx::work hold(*blocker);
  hold.exec("SELECT 1 FROM battle_rooms WHERE room_id = 87 FOR UPDATE");
  hold.exec("SELECT 1 FROM players WHERE player_id = '883' FOR UPDATE");
  lobby.reset();
  lobby = StartLobby(
      {"--maintenance-interval", "100ms", "--lock-timeout-ms", "500", "--release-after", "1s"});
  ASSERT_NE(lobby, nullptr);
  ASSERT_TRUE(WaitUntil([&] {
    return Q("SELECT count(*) FROM battle_rooms WHERE room_id = 88 AND released_at IS NOT NULL") ==
           "1";
  })) << "the room behind the locked one, or the room of the locked player, was never released";
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) = 88"), "0");
  EXPECT_EQ(Q("SELECT released_at IS NULL FROM battle_rooms WHERE room_id = 87"), "t");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) = 87"), "10");
  hold.abort();
  EXPECT_TRUE(WaitUntil([&] {
    return Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0") == "0";
  })) << "the locked room was not released once the lock went";
}

// A release never scans players (it scanned them for in_battle_room, which has no index, and a
// scan took seconds at millions of players; since migration 005 it reads no player). The function
// the lobby runs for :release and --release-after is called in one transaction over 20,000 analyzed
// players, and that transaction's own statistics (pg_stat_xact_user_tables) must show no
// sequential scan of players. bench `ladder` times the same release at ten million players.
TEST_F(RetentionTest, AReleaseReadsItsPlayersByTheirKeysAndNeverScansPlayers) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  db_->Exec("INSERT INTO players (player_id) SELECT 'seed-' || g FROM generate_series(1, 20000) g");
  MustAllocate(lobby->port(), 89);  // players 891..900
  db_->Exec("ANALYZE players");
  auto conn = db_->Connect();
  pqxx::work tx(*conn);
  const pqxx::row released =
      tx.exec1("SELECT status, players_released FROM verdict_release_room(89)");
  EXPECT_EQ(released[0].as<std::string>(), "released");
  EXPECT_EQ(released[1].as<int>(), 10);
  EXPECT_EQ(tx.exec1("SELECT coalesce(seq_scan, 0) FROM pg_stat_xact_user_tables "
                     "WHERE relname = 'players'")[0]
                .as<int64_t>(),
            0)
      << "the release scanned players";
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM battle_room_seats s WHERE s.room_id = 89 "
                     "AND verdict_player_room(s.player_id) <> 0")[0]
                .as<int>(),
            0);
  tx.commit();
}

// Whether a player is busy is read from the seats by key, whatever the queue tables' statistics
// say (verdict_player_room): analyzed while empty, then 2,000 rooms allocated, the tables still
// say they are empty. Planned as sets, the lookup hashed every room not released for each
// player, and ordered by room it read every seat; here one transaction asks for one player and
// its own statistics (pg_stat_xact_user_tables) must show a handful of rows read from each table.
TEST_F(RetentionTest, APlayersRoomIsReadByKeysWhateverTheStatisticsSay) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  db_->Exec("ANALYZE battle_rooms, battle_room_seats");
  db_->Exec(
      "SELECT count(*) FROM generate_series(1001, 3000) g, LATERAL verdict_allocate(g::bigint, "
      "'node-a', 'default', ARRAY[g || '-1', g || '-2'], ARRAY[1, 2]::smallint[]) a "
      "WHERE a.status = 'allocated'");
  ASSERT_EQ(Q("SELECT count(*) FROM battle_rooms"), "2000");
  auto conn = db_->Connect();
  pqxx::work tx(*conn);
  EXPECT_EQ(tx.exec1("SELECT verdict_player_room('2500-2')")[0].as<int64_t>(), 2500);
  EXPECT_EQ(tx.exec1("SELECT verdict_player_room('nobody')")[0].as<int64_t>(), 0);
  const pqxx::result read = tx.exec(
      "SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
      "FROM pg_stat_xact_user_tables WHERE relname IN ('battle_rooms', "
      "'battle_room_seats')");
  for (const auto& row : read) {
    EXPECT_LE(row[1].as<int64_t>(), 4) << row[0].as<std::string>() << " was read whole";
  }
  tx.commit();
}

// reconcile, completed: lost rooms are aborted after being listed (--abort-lost); a receipt
// without its event is reported; rooms of nodes without a listing have their own exit status;
// and the lobby exports how long the oldest unsettled room has waited.
TEST_F(RetentionTest, ReconcileAbortsLostRoomsReportsMissingEventsAndUncheckedRooms) {
  auto lobby = StartLobby({"--maintenance-interval", "100ms"});
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 91);
  MustAllocate(lobby->port(), 92, "node-b");
  AllocateAndSettle(lobby->port(), 93);
  EXPECT_TRUE(WaitUntil([&] {
    return MetricValue(HttpCall(lobby->port(), "GET", "/metrics").body,
                       "verdict_lobby_oldest_unsettled_allocation_seconds") > 0;
  }));
  TempDir dir;
  const std::string listing = dir.Sub("node-a.json");
  std::ofstream(listing) << R"({"records":[],"complete":true})";
  const auto reconcile = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {LobbyBinary(), "--db",         db_->conninfo(),
                                     "reconcile",   "--older-than", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  };
  CommandResult run = reconcile({"--outbox", "node-a=" + listing, "--abort-lost"});
  EXPECT_EQ(run.exit_code, 3) << run.out;
  const size_t listed = run.out.find("LOST: 1 room");
  const size_t aborted = run.out.find("room 91: aborted");
  EXPECT_NE(listed, std::string::npos) << run.out;
  EXPECT_NE(aborted, std::string::npos) << run.out;
  EXPECT_LT(listed, aborted) << "aborted before it was listed";
  EXPECT_EQ(Q("SELECT outcome FROM settlement_receipts WHERE room_id = 91"), "ABORTED");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) = 91"), "0");

  run = reconcile({"--outbox", "node-a=" + listing});
  EXPECT_EQ(run.exit_code, 5) << "room 92 of node-b is unchecked: " << run.out;
  MustAllocate(lobby->port(), 94, "node-b");
  db_->Exec("DELETE FROM settlement_events WHERE room_id = 93");
  run = reconcile({"--json"});
  EXPECT_EQ(run.exit_code, 4) << run.out;
  EXPECT_NE(run.out.find(R"("receipts_without_event":[{"room_id":"93","node_id":"node-a")"),
            std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace verdict::testing
