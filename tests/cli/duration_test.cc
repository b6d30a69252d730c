// Durations as operators write them on the command line and in --config files.
#include "cli/duration.h"

#include <gtest/gtest.h>

namespace verdict::cli {
namespace {

using std::chrono::milliseconds;

TEST(DurationTest, ReadsEachUnit) {
  EXPECT_EQ(*ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("90s"), milliseconds(90'000));
  EXPECT_EQ(*ParseDuration("15m"), milliseconds(900'000));
  EXPECT_EQ(*ParseDuration("12h"), milliseconds(43'200'000));
  EXPECT_EQ(*ParseDuration("7d"), milliseconds(604'800'000));
  EXPECT_EQ(*ParseDuration("0s"), milliseconds(0));
}

TEST(DurationTest, RefusesWhatIsNotOne) {
  for (const char* bad :
       {"", "7", "d", "-1s", "1.5h", "7 d", "7days", "1w", "99999999999999999999d", "off"}) {
    const auto parsed = ParseDuration(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("is not a duration"), std::string::npos);
    }
  }
}

// Longer than a century is refused as it is read, naming the longest accepted: such a window
// would parse and then fail every retention pass ("timestamp out of range") or overflow a clock.
TEST(DurationTest, RefusesWhatIsLongerThanTheLongestAcceptedAndNamesIt) {
  EXPECT_EQ(*ParseDuration("36500d"), kLongestDuration);
  EXPECT_EQ(*ParseDuration("876000h"), kLongestDuration);
  EXPECT_EQ(**ParseDurationOrOff("36500d"), kLongestDuration);
  for (const char* long_one : {"36501d", "876001h", "10000000d", "3153600000001ms",
                               "99999999999999999d", "9223372036854775807ms"}) {
    const auto parsed = ParseDuration(long_one);
    const auto or_off = ParseDurationOrOff(long_one);
    ASSERT_FALSE(parsed.ok()) << long_one;
    ASSERT_FALSE(or_off.ok()) << long_one;
    for (const Status& refused : {parsed.status(), or_off.status()}) {
      EXPECT_NE(refused.message().find("longer than 36500d, the longest accepted"),
                std::string::npos)
          << refused.message();
    }
  }
}

TEST(DurationTest, OffIsNoDurationWhereAllowed) {
  EXPECT_FALSE(ParseDurationOrOff("off")->has_value());
  EXPECT_EQ(**ParseDurationOrOff("2h"), milliseconds(7'200'000));
  EXPECT_FALSE(ParseDurationOrOff("never").ok());
}

// A flag shows an options struct's default through FormatDuration; what it shows must read back
// as the same duration, in the largest whole unit.
TEST(DurationTest, FormatsInTheLargestWholeUnitAndReadsBack) {
  EXPECT_EQ(FormatDuration(milliseconds(604'800'000)), "7d");
  EXPECT_EQ(FormatDuration(milliseconds(5'400'000)), "90m");
  EXPECT_EQ(FormatDuration(milliseconds(90'000)), "90s");
  EXPECT_EQ(FormatDuration(milliseconds(1'500)), "1500ms");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDurationOrOff(std::nullopt), "off");
  for (int64_t ms : {1, 999, 1'000, 61'000, 3'600'000, 86'400'000, 90'061'001}) {
    EXPECT_EQ(*ParseDuration(FormatDuration(milliseconds(ms))), milliseconds(ms)) << ms;
  }
}

}  // namespace
}  // namespace verdict::cli
