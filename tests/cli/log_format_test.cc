// Logs an operator can ship, from the real programs: with --log-format json every line a lobby or
// a node writes is one JSON object (a multi-line database error included); the lobby logs each
// result it refuses once, at warning, with its room, node and code, and a flood of them as a
// bounded number of lines that say how many they stand for; a settlement is a debug line. Each
// case runs a few seconds.
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/lobby/lobby_fixture.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using google::protobuf::Struct;

// One parsed line: its members as strings.
using JsonLine = std::map<std::string, std::string>;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every line of `path`, each of which must be one JSON object whose members are strings, with
// time, level, logger and message among them.
std::vector<JsonLine> JsonLines(const std::string& path) {
  std::vector<JsonLine> lines;
  std::istringstream in(ReadAll(path));
  for (std::string text; std::getline(in, text);) {
    Struct object;
    const auto parsed = google::protobuf::util::JsonStringToMessage(text, &object);
    EXPECT_TRUE(parsed.ok()) << "not a JSON object: " << text;
    if (!parsed.ok()) continue;
    JsonLine line;
    for (const auto& [key, value] : object.fields()) {
      EXPECT_EQ(value.kind_case(), google::protobuf::Value::kStringValue) << key << " in " << text;
      line[key] = value.string_value();
    }
    for (const char* member : {"time", "level", "logger", "message"}) {
      EXPECT_TRUE(line.count(member)) << member << " missing in " << text;
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// Lines that are about `code` (a refusal line: room, node and code).
std::vector<JsonLine> WithCode(const std::vector<JsonLine>& lines, const std::string& code) {
  std::vector<JsonLine> found;
  for (const JsonLine& line : lines) {
    if (line.count("code") && line.at("code") == code) found.push_back(line);
  }
  return found;
}

class LogFormatTest : public LobbyFixture {
 protected:
  // A lobby writing its log to log_ in JSON at `level`.
  std::unique_ptr<LobbyProcess> StartJsonLobby(const std::string& level = "info") {
    auto lobby =
        LobbyProcess::Start(db_->conninfo(), {"--log-format", "json", "--log-level", level}, {},
                            "127.0.0.1:0", LobbyBinary(), log_);
    EXPECT_NE(lobby, nullptr) << ReadAll(log_);
    return lobby;
  }

  TempDir dir_;
  const std::string log_ = dir_.Sub("lobby.log");
};

TEST_F(LogFormatTest, EveryLobbyLineIsOneJsonObjectAMultiLineDatabaseErrorIncluded) {
  // A database without the schema: the readiness probe and the maintenance meet PostgreSQL's
  // multi-line errors ("ERROR: ... \nLINE 1: ...\n ^").
  db_->Exec("DROP TABLE verdict_schema_migrations CASCADE");
  auto lobby = StartJsonLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return ReadAll(log_).find("LINE 1") != std::string::npos; }))
      << ReadAll(log_);
  lobby->Stop();
  const std::vector<JsonLine> lines = JsonLines(log_);
  bool multi_line = false;
  for (const JsonLine& line : lines) {
    EXPECT_EQ(line.at("logger"), "lobby");
    EXPECT_EQ(line.at("time").size(), 24u) << line.at("time");
    if (line.at("message").find("\nLINE 1: ") != std::string::npos) multi_line = true;
  }
  EXPECT_TRUE(multi_line) << ReadAll(log_);
  EXPECT_EQ(lines.back().at("message"), "stopped");
}

TEST_F(LogFormatTest, EachRefusedResultIsOneWarningWithItsRoomNodeAndCode) {
  auto lobby = StartJsonLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  for (uint64_t room : {1, 2, 3, 4, 5}) MustAllocate(port, room);
  ASSERT_EQ(Settle(port, MakeResult(1)).status, 200);
  ASSERT_EQ(Settle(port, MakeResult(2)).status, 200);
  ASSERT_EQ(Settle(port, MakeResult(5)).status, 200);

  EXPECT_EQ(Settle(port, MakeResult(90)).status, 404);  // ROOM_UNKNOWN
  v1::BattleResult other = MakeResult(1);
  other.set_winner_team(2);
  EXPECT_EQ(Settle(port, other).status, 422);  // IDEMPOTENCY_MISMATCH
  v1::BattleResult aborted = MakeResult(2);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  aborted.set_abort_reason("host_lost");
  EXPECT_EQ(Settle(port, aborted).status, 409);  // OUTCOME_CONFLICT
  v1::BattleResult stranger = MakeResult(3);
  stranger.mutable_players(0)->set_player_id("999999");
  EXPECT_EQ(Settle(port, stranger).status, 422);  // ROSTER_MISMATCH
  v1::BattleResult no_players = MakeResult(4);
  no_players.clear_players();
  EXPECT_EQ(Settle(port, no_players).status, 400);  // INVALID_ARGUMENT
  // Node b's token for node a's room: ROOM_UNKNOWN, logged with node b.
  EXPECT_EQ(Settle(port, MakeResult(4, 1'700'000'000'000, ""), "token-b").status, 404);
  // The receipts (room 5's) past retention: a redelivery is answered ORIGINAL_EXPIRED.
  const CommandResult retained =
      RunCommand({LobbyBinary(), "--db", db_->conninfo(), "retain", "--receipts-older-than", "0s"});
  ASSERT_EQ(retained.exit_code, 0) << retained.out;
  EXPECT_EQ(Settle(port, MakeResult(5)).status, 410);
  // A batch: two refused items among a settled one.
  const auto items = Items(PostBatch(port, {MakeResult(91), MakeResult(4), MakeResult(92)}));
  ASSERT_EQ(items.items_size(), 3);
  ASSERT_EQ(CodeOf(items.items(1)), "SETTLED");
  lobby->Stop();

  const std::vector<JsonLine> lines = JsonLines(log_);
  struct Expected {
    std::string room, node, code;
  };
  const std::vector<Expected> expected = {
      {"90", "node-a", "ROOM_UNKNOWN"},    {"1", "node-a", "IDEMPOTENCY_MISMATCH"},
      {"2", "node-a", "OUTCOME_CONFLICT"}, {"3", "node-a", "ROSTER_MISMATCH"},
      {"4", "node-a", "INVALID_ARGUMENT"}, {"4", "node-b", "ROOM_UNKNOWN"},
      {"91", "node-a", "ROOM_UNKNOWN"},    {"92", "node-a", "ROOM_UNKNOWN"},
      {"5", "node-a", "ORIGINAL_EXPIRED"}};
  size_t refusals = 0;
  for (const JsonLine& line : lines) refusals += line.count("code");
  EXPECT_EQ(refusals, expected.size()) << ReadAll(log_);
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.room + " " + e.node + " " + e.code);
    int found = 0;
    for (const JsonLine& line : WithCode(lines, e.code)) {
      if (line.at("room") != e.room || line.at("node") != e.node) continue;
      ++found;
      EXPECT_EQ(line.at("level"), "warning");
      EXPECT_TRUE(line.at("message").starts_with("settlement refused: ")) << line.at("message");
    }
    EXPECT_EQ(found, 1) << ReadAll(log_);
  }
  // Settlements themselves are not info lines.
  EXPECT_EQ(ReadAll(log_).find("settled as match"), std::string::npos) << ReadAll(log_);
}

TEST_F(LogFormatTest, ASettlementIsADebugLineWithItsRoomAndNode) {
  auto lobby = StartJsonLobby("debug");
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 7);
  const HttpResponse settled = Settle(lobby->port(), MakeResult(7));
  ASSERT_EQ(settled.status, 200);
  lobby->Stop();
  int found = 0;
  for (const JsonLine& line : JsonLines(log_)) {
    if (!line.at("message").starts_with("settled as match ")) continue;
    ++found;
    EXPECT_EQ(line.at("level"), "debug");
    EXPECT_EQ(line.at("room"), "7");
    EXPECT_EQ(line.at("node"), "node-a");
    EXPECT_EQ(line.at("message"),
              "settled as match " + std::to_string(Receipt(settled).match_id()));
  }
  EXPECT_EQ(found, 1) << ReadAll(log_);
}

TEST_F(LogFormatTest, AFloodOfRefusalsWritesABoundedNumberOfLinesThatCountTheRest) {
  auto lobby = StartJsonLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  // 1,024 results for rooms nobody allocated, in four batches.
  constexpr int kFlood = 1024;
  const auto started = std::chrono::steady_clock::now();
  for (int b = 0; b < 4; ++b) {
    std::vector<v1::BattleResult> batch;
    for (int i = 0; i < 256; ++i) batch.push_back(MakeResult(100'000 + b * 256 + i));
    ASSERT_EQ(PostBatch(port, batch).status, 200);
  }
  const double flood_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const size_t lines_in_flood = WithCode(JsonLines(log_), "ROOM_UNKNOWN").size();
  // The limit: 50 at once, then one a second.
  EXPECT_GE(lines_in_flood, 50u);
  EXPECT_LE(lines_in_flood, 50u + static_cast<size_t>(flood_s) + 1) << flood_s << " s";

  // One more refusal a while later is let through, and says how many were held back.
  int posted = kFlood;
  std::vector<JsonLine> lines;
  ASSERT_TRUE(WaitUntil([&] {
    EXPECT_EQ(Settle(port, MakeResult(200'000 + posted)).status, 404);
    ++posted;
    lines = WithCode(JsonLines(log_), "ROOM_UNKNOWN");
    return lines.back().count("suppressed") > 0;
  }));
  uint64_t said_suppressed = 0;
  for (const JsonLine& line : lines) {
    if (line.count("suppressed")) said_suppressed += std::stoull(line.at("suppressed"));
  }
  // Every refusal is either a line or counted by a later line; the metric counts the same.
  EXPECT_EQ(lines.size() + said_suppressed, static_cast<size_t>(posted));
  const HttpResponse metrics = HttpCall(port, "GET", "/metrics");
  EXPECT_EQ(MetricValue(metrics.body, "verdict_lobby_refusal_log_lines_suppressed_total"),
            static_cast<double>(said_suppressed))
      << metrics.body;
  EXPECT_EQ(MetricValue(metrics.body, "verdict_lobby_settlements_total{code=\"ROOM_UNKNOWN\"}"),
            static_cast<double>(posted));
}

// A node's lines, the library's included: JSON with the shard a line concerns; the text format
// is the default; and a node that cannot start says why in JSON too.
TEST(NodeLogFormatTest, EveryNodeLineIsOneJsonObjectWithTheShardItConcerns) {
  TempDir dir;
  const std::vector<std::string> run = {NodeBinary(),
                                        "--log-format",
                                        "json",
                                        "run",
                                        "--node-id",
                                        "node-a",
                                        "--outbox",
                                        dir.Sub("outbox"),
                                        "--lobby",
                                        "http://127.0.0.1:1",
                                        "--token",
                                        "token-a",
                                        "--ingest-listen",
                                        "127.0.0.1:0",
                                        "--ingest-token",
                                        "ingest-token"};
  auto node = ChildProcess::Start(run, {}, dir.Sub("node.log"));
  uint16_t port = 0;
  ASSERT_TRUE(WaitUntil([&] {
    std::istringstream in(ReadAll(dir.Sub("node.log")));
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("ingest on port ")) port = std::stoi(line.substr(15));
    }
    return port != 0 || !node->Running();
  }));
  ASSERT_NE(port, 0) << ReadAll(dir.Sub("node.log"));
  // A result the node cannot deliver (nothing listens at the lobby's address): its shard warns.
  v1::BattleResult result = MakeResult(5);
  result.clear_node_id();
  const HttpResponse stored =
      HttpCall(port, "POST", "/v1/results",
               {{"Content-Type", "application/json"}, {"Authorization", "Bearer ingest-token"}},
               wire::EncodeBody(result, wire::BodyFormat::kJson).value());
  ASSERT_EQ(stored.status, 201) << stored.body;
  ASSERT_TRUE(WaitUntil([&] {
    return ReadAll(dir.Sub("node.log")).find("\"shard\":") != std::string::npos;
  })) << ReadAll(dir.Sub("node.log"));
  node->Terminate();
  // Standard output is the program's own (ports, progress); the log is standard error.
  std::string log;
  {
    std::istringstream in(ReadAll(dir.Sub("node.log")));
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("{")) log += line + "\n";
    }
  }
  std::ofstream(dir.Sub("json.log")) << log;
  const std::vector<JsonLine> lines = JsonLines(dir.Sub("json.log"));
  bool shard_line = false;
  for (const JsonLine& line : lines) {
    if (!line.count("shard")) continue;
    shard_line = true;
    EXPECT_EQ(line.at("logger"), "verdict");  // the library's logger
    EXPECT_EQ(line.at("level"), "warning");
    EXPECT_FALSE(line.at("message").starts_with("shard=")) << line.at("message");
  }
  EXPECT_TRUE(shard_line) << log;

  // Refused at start: the reason is a JSON error line, whatever the level.
  const ExitAndOutput refused =
      RunToExit({NodeBinary(), "--log-format", "json", "--log-level", "off", "run", "--node-id",
                 "node-a", "--outbox", dir.Sub("outbox"), "--lobby", "http://127.0.0.1:1"});
  EXPECT_EQ(refused.code, 1);
  std::ofstream(dir.Sub("refused.log")) << refused.output;
  const std::vector<JsonLine> why = JsonLines(dir.Sub("refused.log"));
  ASSERT_EQ(why.size(), 1u) << refused.output;
  EXPECT_EQ(why[0].at("level"), "error");
  EXPECT_EQ(why[0].at("logger"), "node");
  EXPECT_EQ(why[0].at("message"), "--token or --lobby-token-file is required");

  // The same from a --config file.
  std::ofstream(dir.Sub("node.conf")) << "log-format = json\n";
  const ExitAndOutput configured =
      RunToExit({NodeBinary(), "--config", dir.Sub("node.conf"), "run", "--node-id", "node-a",
                 "--outbox", dir.Sub("outbox"), "--lobby", "http://127.0.0.1:1"});
  EXPECT_EQ(configured.code, 1);
  EXPECT_TRUE(configured.output.starts_with("{\"time\":")) << configured.output;
  EXPECT_NE(configured.output.find("\"message\":\"--token or --lobby-token-file is required\""),
            std::string::npos)
      << configured.output;

  // The default stays text.
  const ExitAndOutput text = RunToExit({NodeBinary(), "run", "--node-id", "node-a", "--outbox",
                                        dir.Sub("outbox"), "--lobby", "http://127.0.0.1:1"});
  EXPECT_EQ(text.output, "verdict-node: --token or --lobby-token-file is required\n");
  // A format that is neither is a usage error.
  const ExitAndOutput bogus = RunToExit({NodeBinary(), "--log-format", "yaml", "run"});
  EXPECT_NE(bogus.code, 0);
  EXPECT_NE(bogus.output.find("--log-format"), std::string::npos) << bogus.output;
}

}  // namespace
}  // namespace verdict::testing
