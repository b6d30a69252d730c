// The lobby's event feed (GET /v1/events) against a real PostgreSQL: commit order that no
// resume can skip, catch-up of a deep history in bounded memory by fast and stalled readers,
// the byte budget that closes a slow live subscriber, and node scoping.
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "tests/lobby/lobby_fixture.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;
using EventFeedTest = LobbyFixture;

// One /v1/events message: {"event_id": "N", "event": {…, "room_id": "R"}}.
struct FeedMessage {
  int64_t event_id = -1;
  std::string room_id;
};

FeedMessage Parse(const std::string& message) {
  google::protobuf::Struct parsed;
  FeedMessage out;
  if (!google::protobuf::util::JsonStringToMessage(message, &parsed).ok()) return out;
  out.event_id = std::stoll(parsed.fields().at("event_id").string_value());
  out.room_id = parsed.fields().at("event").struct_value().fields().at("room_id").string_value();
  return out;
}

// Reads `n` messages (or until none comes for 10 s) and checks they are in feed order.
std::vector<FeedMessage> ReadMessages(WsClient& ws, size_t n) {
  std::vector<FeedMessage> got;
  while (got.size() < n) {
    auto message = ws.Read(10s);
    if (!message) break;
    got.push_back(Parse(*message));
    if (got.size() > 1) {
      EXPECT_GT(got.back().event_id, got[got.size() - 2].event_id) << "out of feed order";
    }
  }
  return got;
}

// Writes `n` settlement events (with their matches) for `node` straight into the database, as
// a day of play would leave them, with `padding` bytes each. The lobby numbers them.
void SeedEvents(LobbyFixture& f, int n, const std::string& node, int64_t first_room,
                int padding = 1000) {
  f.db_->Exec(
      "WITH m AS (INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, "
      "ended_at_ms) SELECT " +
      std::to_string(first_room) + " + g, '" + node +
      "', 'SETTLED', 1, false, 0 FROM generate_series(0, " + std::to_string(n - 1) +
      ") g RETURNING match_id, room_id, node_id) "
      "INSERT INTO settlement_events (room_id, node_id, match_id, payload) "
      "SELECT room_id, node_id, match_id, jsonb_build_object('type', 'battle.settled', "
      "'room_id', room_id::text, 'padding', repeat('x', " +
      std::to_string(padding) + ")) FROM m ORDER BY room_id");
}

// Waits (up to 30 s) until the lobby has numbered every event.
bool AllNumbered(LobbyFixture& f) {
  for (int i = 0; i < 300; ++i) {
    if (f.Q("SELECT count(*) FROM settlement_events WHERE seq IS NULL") == "0") return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

double Metric(uint16_t port, const std::string& name) {
  const HttpResponse r = HttpCall(port, "GET", "/metrics");
  const size_t at = r.body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r.body.substr(at + name.size() + 2));
}

long RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return -1;
}

constexpr int kDeepHistory = 12'000;

TEST_F(EventFeedTest, FastReaderCatchesUpADeepHistoryOnceAndInOrder) {
  SeedEvents(*this, kDeepHistory, "node-a", 100'000);
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_TRUE(AllNumbered(*this));
  WsClient reader;
  ASSERT_TRUE(reader.Connect(lobby->port(), "/v1/events?after=0", "token-a")) << reader.error();
  const std::vector<FeedMessage> got = ReadMessages(reader, kDeepHistory);
  ASSERT_EQ(got.size(), static_cast<size_t>(kDeepHistory));
  std::set<std::string> rooms;
  for (const auto& m : got) rooms.insert(m.room_id);
  EXPECT_EQ(rooms.size(), static_cast<size_t>(kDeepHistory)) << "an event arrived twice";
  EXPECT_EQ(got.back().event_id, kDeepHistory);
  EXPECT_FALSE(reader.Read(1s).has_value()) << "more events than the history holds";
  EXPECT_TRUE(lobby->Running());
}

// SIGTERM while subscribers are catching up: page reads are in flight on the hub's threads, and
// each holds its subscriber. The lobby must release them before its server goes, and exit 0.
// (It used to die of SIGSEGV here: a page finished after the server's io_context was destroyed,
// and the subscriber's WebSocket stream was then torn down against the freed service.)
TEST_F(EventFeedTest, ShutdownWhileSubscribersCatchUpExitsCleanly) {
  SeedEvents(*this, kDeepHistory, "node-a", 100'000, /*padding=*/100);
  constexpr int kRounds = 6;
  constexpr int kReaders = 4;
  for (int round = 0; round < kRounds; ++round) {
    auto lobby = StartLobby();
    ASSERT_NE(lobby, nullptr);
    ASSERT_TRUE(AllNumbered(*this));
    std::atomic<int> read{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
      readers.emplace_back([&, port = lobby->port()] {
        for (;;) {  // reconnect from the start: keep pages in flight until the lobby goes
          WsClient ws;
          if (!ws.Connect(port, "/v1/events?after=0", "admin-token")) return;
          while (ws.Read(2s)) ++read;
        }
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (read.load() < 2'000 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(37 * round));  // vary the moment
    const int status = lobby->Stop();
    for (auto& t : readers) t.join();
    ASSERT_GE(read.load(), 2'000) << "round " << round << ": the readers never got going";
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "round " << round << ": the lobby ended with wait status " << status
        << (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : "");
  }
}

// A reader that takes nothing for a while: the lobby pages the history only as the socket
// drains, so what it holds for the reader stays within the budget plus one page.
TEST_F(EventFeedTest, StalledReaderHoldsAtMostItsBudgetThenGetsEverything) {
  SeedEvents(*this, kDeepHistory, "node-a", 100'000);
  constexpr size_t kBudget = 64 * 1024;
  auto lobby = StartLobby({"--subscriber-buffer-bytes", std::to_string(kBudget)});
  ASSERT_NE(lobby, nullptr);
  ASSERT_TRUE(AllNumbered(*this));
  const long rss_before = RssKiB(lobby->pid());
  WsClient reader;
  ASSERT_TRUE(reader.Connect(lobby->port(), "/v1/events?after=0", "admin-token"));
  // The socket's buffers fill first (12 MB of events do not fit); then the lobby queues.
  double queued = 0;
  for (int i = 0; i < 100 && queued <= 0; ++i) {
    std::this_thread::sleep_for(100ms);
    queued = Metric(lobby->port(), "verdict_lobby_event_queued_bytes");
  }
  ASSERT_GT(queued, 0) << "the reader never fell behind; the test proves nothing";
  const double page_bytes = 256 * 1200.0;  // a catch-up page of ~1.1 KB events
  for (int i = 0; i < 10; ++i) {
    EXPECT_LE(Metric(lobby->port(), "verdict_lobby_event_queued_bytes"), kBudget + page_bytes);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_LT(RssKiB(lobby->pid()) - rss_before, 64 * 1024) << "the lobby's memory grew unbounded";

  const std::vector<FeedMessage> got = ReadMessages(reader, kDeepHistory);
  ASSERT_EQ(got.size(), static_cast<size_t>(kDeepHistory));
  EXPECT_EQ(got.front().event_id, 1);
  EXPECT_EQ(got.back().event_id, kDeepHistory);
  EXPECT_TRUE(lobby->Running());
}

// A live subscriber that stops reading while events pour in is closed with 1013 and a reason,
// and resumes from the last event it got without a gap or a repeat.
TEST_F(EventFeedTest, LiveSubscriberPastItsBudgetIsClosedAndResumesWithAfter) {
  auto lobby = StartLobby({"--subscriber-buffer-bytes", "65536"});
  ASSERT_NE(lobby, nullptr);
  WsClient slow;
  ASSERT_TRUE(slow.Connect(lobby->port(), "/v1/events", "token-a"));
  std::this_thread::sleep_for(500ms);  // let it go live on the empty feed
  SeedEvents(*this, kDeepHistory, "node-a", 100'000);
  ASSERT_TRUE(AllNumbered(*this));
  std::vector<FeedMessage> got = ReadMessages(slow, kDeepHistory);
  ASSERT_LT(got.size(), static_cast<size_t>(kDeepHistory)) << "the slow subscriber was not closed";
  EXPECT_EQ(slow.close_code(), 1013);
  EXPECT_NE(slow.close_reason().find("?after="), std::string::npos) << slow.close_reason();

  const int64_t last = got.empty() ? 0 : got.back().event_id;
  WsClient resumed;
  ASSERT_TRUE(
      resumed.Connect(lobby->port(), "/v1/events?after=" + std::to_string(last), "token-a"));
  const std::vector<FeedMessage> rest = ReadMessages(resumed, kDeepHistory - got.size());
  ASSERT_EQ(got.size() + rest.size(), static_cast<size_t>(kDeepHistory));
  if (!rest.empty()) {
    EXPECT_EQ(rest.front().event_id, last + 1);
  }
}

TEST_F(EventFeedTest, NodeTokenSeesOnlyItsOwnNodesEvents) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room : {1, 2, 3}) MustAllocate(lobby->port(), room, "node-a");
  for (uint64_t room : {4, 5}) MustAllocate(lobby->port(), room, "node-b");
  for (uint64_t room : {1, 4, 2, 5, 3}) {
    const bool b = room >= 4;
    ASSERT_EQ(Settle(lobby->port(), MakeResult(room, 1'700'000'000'000, b ? "node-b" : "node-a"),
                     b ? "token-b" : "token-a")
                  .status,
              200);
  }
  // The first `n` events a token sees: the other node's events come between its own, so one that
  // leaked would show among them (reading only as many as expected waits for nothing).
  auto rooms_seen_by = [&](const std::string& token, size_t n) {
    WsClient ws;
    EXPECT_TRUE(ws.Connect(lobby->port(), "/v1/events?after=0", token));
    std::string rooms;
    for (const FeedMessage& m : ReadMessages(ws, n)) rooms += m.room_id + ",";
    return rooms;
  };
  EXPECT_EQ(rooms_seen_by("token-a", 3), "1,2,3,");
  EXPECT_EQ(rooms_seen_by("token-b", 2), "4,5,");
  EXPECT_EQ(rooms_seen_by("admin-token", 5), "1,4,2,5,3,");
}

// Two settlements commit out of insert order: room 71 takes its event id first, then waits;
// room 72 takes a later id and commits first. The feed must still deliver both, and a client
// that resumes after 72 must get 71. Lobby b never LISTENs: polling alone must suffice.
TEST_F(EventFeedTest, CommitsOutOfIdOrderAreNeitherSkippedNorLostWithoutNotifications) {
  // No partition is made during the test: making one waits for the held transaction below, and
  // every settlement would queue behind it.
  auto a = StartLobby({"--maintenance-interval", "1h"});
  auto b = StartLobby({"--maintenance-interval", "1h"},
                      {{"VERDICT_FAILPOINTS", "hub.before_listen=error"}});
  ASSERT_TRUE(a && b);
  MustAllocate(a->port(), 71);
  MustAllocate(a->port(), 72);
  WsClient live;
  ASSERT_TRUE(live.Connect(b->port(), "/v1/events", "token-a"));

  // Hold room 71's event slot: an uncommitted event row with its room id makes the settlement's
  // own event INSERT wait, after it has drawn its event id. The partitioned feed keeps no unique
  // key on an event's room (sql/001_baseline.sql), so the test gives each of its partitions one.
  db_->Exec(R"(
      DO $$ DECLARE p record; BEGIN
        FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'settlement_events'::regclass LOOP
          EXECUTE format('CREATE UNIQUE INDEX ON %I (room_id)', p.relname);
        END LOOP;
      END $$)");
  auto blocker = db_->Connect();
  pqxx::work hold(*blocker);
  const std::string match =
      hold.exec1(
              "INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, ended_at_ms) "
              "VALUES (900071, 'x', 'SETTLED', 1, false, 0) RETURNING match_id")[0]
          .as<std::string>();
  hold.exec(
      "INSERT INTO settlement_events (room_id, node_id, match_id, payload) VALUES (71, 'x', " +
      match + ", '{}')");
  HttpResponse first;
  std::thread settle71([&] { first = Settle(a->port(), MakeResult(71)); });
  bool waiting = false;
  for (int i = 0; i < 100 && !waiting; ++i) {
    std::this_thread::sleep_for(50ms);
    waiting = Q("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                "wait_event_type = 'Lock' AND query LIKE '%verdict_settle_write(%'") == "1";
  }
  ASSERT_TRUE(waiting) << "room 71's settlement never reached its event insert";
  ASSERT_EQ(Settle(a->port(), MakeResult(72)).status, 200);
  auto m72 = live.Read(10s);
  ASSERT_TRUE(m72);
  const FeedMessage seen72 = Parse(*m72);
  EXPECT_EQ(seen72.room_id, "72");

  hold.abort();
  settle71.join();
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_LT(std::stoll(Q("SELECT event_id FROM settlement_events WHERE room_id = 71")),
            std::stoll(Q("SELECT event_id FROM settlement_events WHERE room_id = 72")))
      << "the two did not commit out of insert order; the test proves nothing";
  auto m71 = live.Read(10s);
  ASSERT_TRUE(m71) << "room 71's event never reached the live subscriber";
  EXPECT_EQ(Parse(*m71).room_id, "71");
  EXPECT_GT(Parse(*m71).event_id, seen72.event_id);

  WsClient resumed;
  ASSERT_TRUE(
      resumed.Connect(b->port(), "/v1/events?after=" + std::to_string(seen72.event_id), "token-a"));
  auto again = resumed.Read(10s);
  ASSERT_TRUE(again) << "a client resuming after room 72 never got room 71";
  EXPECT_EQ(Parse(*again).room_id, "71");
}

// A series of the lobby's event feed reads (verdict_lobby_event_feed_reads_total) by `reader`.
double FeedReads(uint16_t port, const std::string& reader) {
  return MetricValue(HttpCall(port, "GET", "/metrics").body,
                     "verdict_lobby_event_feed_reads_total{reader=\"" + reader + "\"}");
}

// Reads until `ws` is closed (or nothing comes for 20 s); true if it was closed with 4409 and a
// reason containing `why`.
::testing::AssertionResult ClosedAsRewound(WsClient& ws, const std::string& why) {
  while (ws.Read(20s)) {
  }
  if (ws.close_code() == 4409 && ws.close_reason().find(why) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "closed with " << ws.close_code() << " \""
                                       << ws.close_reason() << "\" (0: not closed within 20 s)";
}

// The database goes back in time under a running lobby (a backup restored, a failover to a
// standby that lacked the newest commits): here its newest events vanish. The lobby notices and
// closes every live subscriber with 4409 and a reason, instead of letting it skip the events
// that take the places it had passed. Judged again, a cursor past the head is refused, and one
// within the feed gets the next event at the place that was handed out again.
TEST_F(EventFeedTest, ConnectedSubscribersAreClosedWhenTheFeedGoesBackInTime) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 1; room <= 5; ++room) AllocateAndSettle(lobby->port(), room);
  WsClient admin, node;
  ASSERT_TRUE(admin.Connect(lobby->port(), "/v1/events?after=0", "admin-token"));
  ASSERT_TRUE(node.Connect(lobby->port(), "/v1/events?after=0", "token-a"));
  ASSERT_EQ(ReadMessages(admin, 5).size(), 5u);
  ASSERT_EQ(ReadMessages(node, 5).size(), 5u);

  db_->Exec("DELETE FROM settlement_events WHERE seq > 3");
  EXPECT_TRUE(ClosedAsRewound(admin, "the feed went back in time"));
  EXPECT_TRUE(ClosedAsRewound(node, "the feed went back in time"));
  EXPECT_EQ(MetricValue(HttpCall(lobby->port(), "GET", "/metrics").body,
                        "verdict_lobby_event_feed_rewinds_total"),
            1);

  const HttpResponse ahead = Subscribe(lobby->port(), "?after=5");
  EXPECT_EQ(ahead.status, 409) << ahead.body;
  EXPECT_EQ(Member(ahead, "code"), "CURSOR_AHEAD");
  WsClient resumed;
  ASSERT_TRUE(resumed.Connect(lobby->port(), "/v1/events?after=3", "token-a")) << resumed.error();
  AllocateAndSettle(lobby->port(), 6);
  const std::vector<FeedMessage> got = ReadMessages(resumed, 1);
  ASSERT_EQ(got.size(), 1u) << "the event at the place handed out again never came";
  EXPECT_EQ(got[0].event_id, 4);
  EXPECT_EQ(got[0].room_id, "6");
}

// The restore procedure under a running lobby: the database goes back (its newest events are
// gone) and `new-epoch` gives the feed a new epoch. Every live subscriber is closed with 4409 and
// the reason; the old epoch is then refused, and a subscriber of the new epoch is served at the
// feed's normal pace: it reads the database for its catch-up and then waits for the hub, rather
// than reading in a loop until the feed passes the old head.
TEST_F(EventFeedTest, ConnectedSubscribersAreClosedWhenTheFeedGetsANewEpoch) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 1; room <= 4; ++room) AllocateAndSettle(lobby->port(), room);
  const std::string old_epoch = Q("SELECT epoch FROM verdict_feed");
  WsClient live;
  ASSERT_TRUE(live.Connect(lobby->port(), "/v1/events?after=0&epoch=" + old_epoch, "token-a"));
  ASSERT_EQ(ReadMessages(live, 4).size(), 4u);

  // The restore and its new epoch at once, as the hub sees them (what `verdict-lobby new-epoch`
  // runs, in the restore's transaction: the hub could otherwise see the restore alone first, and
  // close the subscribers for that).
  db_->Exec(
      "DELETE FROM settlement_events WHERE seq > 2; "
      "UPDATE verdict_feed SET epoch = verdict_new_epoch()");
  const std::string epoch = Q("SELECT epoch FROM verdict_feed");
  EXPECT_TRUE(ClosedAsRewound(live, "the feed has a new epoch"));

  const HttpResponse old = Subscribe(lobby->port(), "?after=2&epoch=" + old_epoch, "token-a");
  EXPECT_EQ(old.status, 409) << old.body;
  EXPECT_EQ(Member(old, "code"), "EPOCH_CHANGED");
  const double catch_up_before = FeedReads(lobby->port(), "catch_up");
  WsClient renewed_reader;
  ASSERT_TRUE(renewed_reader.Connect(lobby->port(), "/v1/events?after=2&epoch=" + epoch, "token-a"))
      << renewed_reader.error();
  // While the hub reads the feed eight more times (two seconds at its 250 ms pace), the new
  // subscriber has read it once or twice, not the thousands of times a loop would.
  const double hub_before = FeedReads(lobby->port(), "hub");
  ASSERT_TRUE(WaitUntil([&] { return FeedReads(lobby->port(), "hub") >= hub_before + 8; }, 30s));
  EXPECT_LE(FeedReads(lobby->port(), "catch_up") - catch_up_before, 2);
  AllocateAndSettle(lobby->port(), 5);
  const std::vector<FeedMessage> got = ReadMessages(renewed_reader, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event_id, 3);
  EXPECT_EQ(got[0].room_id, "5");
}

// With one room a transaction, each commit makes the hub pass once (number the event, read where
// the feed stands). The notification its own sequencer sends for what that pass numbered does not
// make it pass again: it did before, and at one room a transaction the hub then cost the database
// as much as the settlements. With nobody subscribed a pass reads the feed once (reads "hub").
// Besides a pass per commit the hub passes once a poll interval (250 ms), so the bound allows
// one for every interval the settlements took, however slow the machine.
TEST_F(EventFeedTest, TheHubPassesOnceACommitNotAgainForItsOwnNotification) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  constexpr int kRooms = 30;
  for (uint64_t room = 1; room <= kRooms; ++room) MustAllocate(lobby->port(), room);
  const double before = FeedReads(lobby->port(), "hub");
  const auto started = std::chrono::steady_clock::now();
  for (uint64_t room = 1; room <= kRooms; ++room) {
    ASSERT_EQ(Settle(lobby->port(), MakeResult(room)).status, 200);
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return Q("SELECT count(*) FROM settlement_events WHERE seq IS NULL") == "0"; }, 30s));
  const double passes = FeedReads(lobby->port(), "hub") - before;
  const auto intervals = (std::chrono::steady_clock::now() - started) / 250ms + 1;
  EXPECT_LE(passes, kRooms + static_cast<double>(intervals) + 2)
      << "the hub passed again for its own notifications (" << intervals << " intervals)";
  EXPECT_GE(passes, 1);
}

// Before the hub's next read notices that the feed went back in time, a subscriber may find it
// first: its catch-up page has a head below the one the hub had read. It is closed with 4409 at
// once, instead of reading the database in a loop for the hub's head to come (which it would not
// while the feed stayed below it). The hub is held here by a failpoint that fails its reads, so
// its head stays where it was.
TEST_F(EventFeedTest, ASubscriberFindingTheFeedBelowTheHubsHeadIsClosedNotLeftReadingInALoop) {
  SeedEvents(*this, 5, "node-a", 100);
  db_->Exec("SELECT verdict_sequence_events(100)");
  auto lobby = StartLobby({}, {{"VERDICT_FAILPOINTS", "hub.before_read=error"}});
  ASSERT_NE(lobby, nullptr);
  db_->Exec("DELETE FROM settlement_events WHERE seq > 3");
  WsClient reader;
  ASSERT_TRUE(reader.Connect(lobby->port(), "/v1/events?after=0", "admin-token")) << reader.error();
  EXPECT_TRUE(ClosedAsRewound(reader, "the feed went back in time"));
  EXPECT_LE(FeedReads(lobby->port(), "catch_up"), 2);
}

TEST_F(EventFeedTest, SubscribersOverTheCapAreRefused) {
  auto lobby = StartLobby({"--max-subscribers", "2"});
  ASSERT_NE(lobby, nullptr);
  WsClient one, two, three;
  ASSERT_TRUE(one.Connect(lobby->port(), "/v1/events", "token-a"));
  ASSERT_TRUE(two.Connect(lobby->port(), "/v1/events", "token-a"));
  EXPECT_FALSE(three.Connect(lobby->port(), "/v1/events", "token-a"));
  EXPECT_NE(three.error().find("handshake"), std::string::npos) << three.error();
}

}  // namespace
}  // namespace verdict::testing
