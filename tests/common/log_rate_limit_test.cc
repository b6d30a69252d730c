// The rate limit of repeated log lines (common/log_rate_limit.h), on a fake clock: a flood lets
// through its burst and then one line a second, and every line held back is counted and reported
// by the next line LogLimited writes.
#include "common/log_rate_limit.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "common/log.h"

namespace verdict {
namespace {

// Lines let through, and the `suppressed` counts they carried, out of `n` offered at once.
struct Offered {
  uint64_t admitted = 0;
  std::vector<uint64_t> reported;
};

Offered Offer(LogRateLimit& limit, int n) {
  Offered o;
  for (int i = 0; i < n; ++i) {
    uint64_t suppressed = 0;
    if (limit.Admit(&suppressed)) {
      ++o.admitted;
      o.reported.push_back(suppressed);
    }
  }
  return o;
}

TEST(LogRateLimitTest, AFloodLetsThroughItsBurstThenOneLineASecond) {
  FakeClock clock;
  LogRateLimit limit({.burst = 50, .per_second = 1, .clock = &clock});
  const Offered first = Offer(limit, 10'000);
  EXPECT_EQ(first.admitted, 50u);
  EXPECT_EQ(limit.suppressed_total(), 9'950u);
  for (uint64_t reported : first.reported) EXPECT_EQ(reported, 0u);

  // Ten seconds of the flood go on: ten lines, the first saying how many it stands for.
  uint64_t admitted = 0;
  std::vector<uint64_t> reported;
  for (int ms = 0; ms < 10'000; ms += 10) {
    clock.AdvanceMs(10);
    const Offered o = Offer(limit, 100);
    admitted += o.admitted;
    reported.insert(reported.end(), o.reported.begin(), o.reported.end());
  }
  EXPECT_EQ(admitted, 10u);
  ASSERT_EQ(reported.size(), 10u);
  EXPECT_EQ(reported[0], 9'950u + 9'900u);  // the rest of the first burst, and 99 batches of 100
  EXPECT_EQ(limit.suppressed_total(), 9'950u + 100'000u - 10u);
  uint64_t total_reported = 0;
  for (uint64_t r : reported) total_reported += r;
  // Every line held back is reported by a later one, but the 99 after the last line let through.
  EXPECT_EQ(total_reported + 99, limit.suppressed_total());
}

TEST(LogRateLimitTest, AQuietSpellRefillsTheBurstButNoMore) {
  FakeClock clock;
  LogRateLimit limit({.burst = 5, .per_second = 2, .clock = &clock});
  EXPECT_EQ(Offer(limit, 100).admitted, 5u);
  clock.AdvanceMs(1'000);
  EXPECT_EQ(Offer(limit, 100).admitted, 2u);
  clock.AdvanceMs(3'600'000);
  EXPECT_EQ(Offer(limit, 100).admitted, 5u);
}

TEST(LogRateLimitTest, ConcurrentLinesNeverExceedTheBurst) {
  FakeClock clock;
  LogRateLimit limit({.burst = 50, .per_second = 1, .clock = &clock});
  std::atomic<uint64_t> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] { admitted += Offer(limit, 1000).admitted; });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 50u);
  EXPECT_EQ(limit.suppressed_total(), 4000u - 50u);
}

// What LogLimited writes: the burst, then nothing until the clock has moved on; the next line
// carries `suppressed=N` as the last of its opening fields (or opens with it), so log pipelines
// read it as a field (common/log.h).
TEST(LogRateLimitTest, LogLimitedWritesTheBurstThenSaysHowManyWereHeldBack) {
  FakeClock clock;
  LogRateLimit limit({.burst = 2, .per_second = 1, .clock = &clock});
  std::ostringstream captured;
  spdlog::logger logger("limited", std::make_shared<spdlog::sinks::ostream_sink_st>(captured));
  logger.set_pattern("%v");
  for (int i = 0; i < 10; ++i) {
    LogLimited(logger, limit, spdlog::level::warn, "room={} shard=0: retrying", i);
  }
  clock.AdvanceMs(1'000);
  LogLimited(logger, limit, spdlog::level::warn, "room={} shard=0: retrying", 10);
  clock.AdvanceMs(1'000);
  LogLimited(logger, limit, spdlog::level::warn, "the database is away");
  LogLimited(logger, limit, spdlog::level::warn, "the database is away");
  clock.AdvanceMs(1'000);
  LogLimited(logger, limit, spdlog::level::warn, "the database is away");
  EXPECT_EQ(captured.str(),
            "room=0 shard=0: retrying\n"
            "room=1 shard=0: retrying\n"
            "room=10 shard=0 suppressed=8: retrying\n"
            "the database is away\n"
            "suppressed=1: the database is away\n");
  const LogLine line = SplitLogFields("room=10 shard=0 suppressed=8: retrying");
  ASSERT_EQ(line.fields.size(), 3u);
  EXPECT_EQ(line.fields[2].first, "suppressed");
  EXPECT_EQ(line.fields[2].second, "8");
}

}  // namespace
}  // namespace verdict
