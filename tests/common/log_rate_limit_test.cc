// The refusal log's rate limit (common/log_rate_limit.h), on a fake clock: a flood lets through
// its burst and then one line a second, and every line held back is counted and reported.
#include "common/log_rate_limit.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

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

}  // namespace
}  // namespace verdict
