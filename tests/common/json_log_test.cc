// --log-format json's lines (common/json_log.h): one JSON object per line, whatever the message
// holds, with the fields a line opens with (common/log.h) as members of their own.
#include "common/json_log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

#include "common/log.h"

namespace verdict {
namespace {

std::string Json(std::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

TEST(SplitLogFieldsTest, OpeningKeyValueWordsBecomeFieldsAndTheRestTheMessage) {
  const LogLine line = SplitLogFields("room=42 node=battle-07 code=ROOM_UNKNOWN: refused: why");
  ASSERT_EQ(line.fields.size(), 3u);
  EXPECT_EQ(line.fields[0].first, "room");
  EXPECT_EQ(line.fields[0].second, "42");
  EXPECT_EQ(line.fields[1].second, "battle-07");
  EXPECT_EQ(line.fields[2].first, "code");
  EXPECT_EQ(line.fields[2].second, "ROOM_UNKNOWN");
  EXPECT_EQ(line.message, "refused: why");

  const LogLine shard = SplitLogFields("shard=3: delivery stopped");
  ASSERT_EQ(shard.fields.size(), 1u);
  EXPECT_EQ(shard.fields[0].first, "shard");
  EXPECT_EQ(shard.message, "delivery stopped");
}

TEST(SplitLogFieldsTest, ALineThatDoesNotOpenWithKnownFieldsIsAllMessage) {
  for (const std::string_view text :
       {"SIGTERM: shutting down", "outbox shard=3: damaged", "room=42 is fine", "colour=red: x",
        "room=: empty", "=5: no key", "room=42:no space", "room=42 node=a b: not a field", "",
        "room=42"}) {
    SCOPED_TRACE(text);
    const LogLine line = SplitLogFields(text);
    EXPECT_TRUE(line.fields.empty());
    EXPECT_EQ(line.message, text);
  }
}

TEST(JsonLogTest, StringsAreEscapedSoThatNoTextBreaksOrForgesALine) {
  EXPECT_EQ(Json("plain"), "\"plain\"");
  EXPECT_EQ(Json("a \"quote\" and a \\"), "\"a \\\"quote\\\" and a \\\\\"");
  EXPECT_EQ(Json("line 1\nline 2\r\tend"), "\"line 1\\nline 2\\r\\tend\"");
  // A terminal's escape sequence and other control characters.
  EXPECT_EQ(Json("\x1b[31mred\x07"), "\"\\u001b[31mred\\u0007\"");
  EXPECT_EQ(Json(std::string("nul\0byte", 8)), "\"nul\\u0000byte\"");
  // Valid UTF-8 stays as it is; a byte that is not part of any becomes U+FFFD.
  EXPECT_EQ(Json("joueur é 玩家 🎮"), "\"joueur é 玩家 🎮\"");
  EXPECT_EQ(Json("bad \xff byte"), "\"bad \\ufffd byte\"");
  EXPECT_EQ(Json("cut \xe7\x8e"), "\"cut \\ufffd\\ufffd\"");
  EXPECT_EQ(Json("overlong \xc0\xaf"), "\"overlong \\ufffd\\ufffd\"");
  EXPECT_EQ(Json("surrogate \xed\xa0\x80"), "\"surrogate \\ufffd\\ufffd\\ufffd\"");
}

// Lines through a real spdlog logger with the formatter, as --log-format json sets it up.
class JsonLoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_formatter(std::make_unique<JsonLogFormatter>());
    logger_ = std::make_shared<spdlog::logger>("lobby", sink);
    logger_->set_level(spdlog::level::trace);
  }
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> logger_;
};

TEST_F(JsonLoggerTest, ALineIsOneObjectWithTimeLevelLoggerMessageAndFields) {
  logger_->warn("room={} node={} code={}: settlement refused: {}", 42, "battle-07", "ROOM_UNKNOWN",
                "the room is not allocated to this node");
  const std::string line = out_.str();
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  // {"time":"YYYY-MM-DDTHH:MM:SS.mmmZ", then the members in this order.
  ASSERT_EQ(line.substr(0, 9), "{\"time\":\"");
  const std::string time = line.substr(9, 24);
  EXPECT_EQ(time.size(), 24u);
  EXPECT_EQ(time[4], '-');
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time.substr(19, 1), ".");
  EXPECT_EQ(time.back(), 'Z');
  EXPECT_EQ(line.substr(33),
            "\",\"level\":\"warning\",\"logger\":\"lobby\",\"message\":\"settlement refused: the "
            "room is not allocated to this node\",\"room\":\"42\",\"node\":\"battle-07\","
            "\"code\":\"ROOM_UNKNOWN\"}\n");
}

TEST_F(JsonLoggerTest, AMultiLineDatabaseErrorIsOneLine) {
  // The text libpqxx gives for a statement PostgreSQL refused, as the lobby logs it.
  logger_->error(
      "events: SQL error 42883, a retry would fail the same way: ERROR:  function "
      "verdict_feed_head() does not exist\nLINE 1: SELECT verdict_feed_head()\n               "
      "^\nHINT:  No function matches the given name and argument types.\n");
  const std::string line = out_.str();
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_NE(line.find("\"level\":\"error\""), std::string::npos);
  EXPECT_NE(line.find("does not exist\\nLINE 1: SELECT verdict_feed_head()\\n"), std::string::npos)
      << line;
}

}  // namespace
}  // namespace verdict
