// The benchmarks' readings of a /metrics page: a histogram's quantile and mean over what it gained
// between two readings, as the latency benchmark profiles its posting (bench/metrics_page.h).
#include "bench/metrics_page.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace verdict::bench {
namespace {

// A page with histogram "h" (seconds, buckets 1 ms, 5 ms, +Inf) holding `counts` in each bucket,
// and a gauge beside it whose name starts with the histogram's.
std::string Page(double in_1ms, double in_5ms, double beyond, double sum) {
  const double total = in_1ms + in_5ms + beyond;
  return "# TYPE h histogram\n"
         "h_bucket{le=\"0.001\"} " +
         std::to_string(in_1ms) + "\n" + "h_bucket{le=\"0.005\"} " +
         std::to_string(in_1ms + in_5ms) + "\n" + "h_bucket{le=\"+Inf\"} " + std::to_string(total) +
         "\n" + "h_sum " + std::to_string(sum) + "\n" + "h_count " + std::to_string(total) + "\n" +
         "h_count_of_something_else 7\n";
}

TEST(MetricsPageTest, QuantileCountsOnlyWhatTheHistogramGainedBetweenReadings) {
  // Before: 100 fast observations. Between: 10 more fast ones and 90 slow ones.
  const std::string before = Page(100, 0, 0, 0.05);
  const std::string after = Page(110, 90, 0, 0.05 + 0.01 + 0.27);
  EXPECT_EQ(HistogramQuantileMs(before, after, "h", 0.05), 1);
  EXPECT_EQ(HistogramQuantileMs(before, after, "h", 0.5), 5);
  // From no reading, the fast ones of before dominate the median.
  EXPECT_EQ(HistogramQuantileMs("", after, "h", 0.5), 1);
  EXPECT_DOUBLE_EQ(HistogramMean(before, after, "h"), 0.28 / 100);
}

TEST(MetricsPageTest, NothingGainedIsZeroAndOnlyTheOverflowBucketIsInfinite) {
  const std::string page = Page(5, 0, 0, 0.001);
  EXPECT_EQ(HistogramQuantileMs(page, page, "h", 0.99), 0);
  EXPECT_EQ(HistogramMean(page, page, "h"), 0);
  EXPECT_EQ(HistogramQuantileMs("", "", "h", 0.99), 0);
  EXPECT_TRUE(std::isinf(HistogramQuantileMs(page, Page(5, 0, 3, 1), "h", 0.99)));
}

TEST(MetricsPageTest, MetricValueReadsTheWholeNameOnly) {
  const std::string page = Page(1, 2, 3, 0.5);
  EXPECT_EQ(MetricValue(page, "h_count"), 6);
  EXPECT_EQ(MetricValue(page, "h_count_of_something_else"), 7);
  EXPECT_EQ(MetricValue(page, "h_coun"), 0);
}

}  // namespace
}  // namespace verdict::bench
