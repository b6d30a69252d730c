#include "common/log_rate_limit.h"

#include <algorithm>
#include <cmath>

namespace verdict {
namespace {

constexpr int64_t kLine = 1'000'000;  // credit_ of one line

}  // namespace

LogRateLimit::LogRateLimit(LogRateLimitOptions options)
    : options_(options),
      credit_(static_cast<int64_t>(std::llround(options.burst * kLine))),
      refilled_at_us_(options.clock->MonotonicUs()) {}

bool LogRateLimit::Admit(uint64_t* suppressed) {
  MutexLock lock(&mu_);
  const int64_t now_us = options_.clock->MonotonicUs();
  // per_second lines a second are per_second millionths of a line a microsecond.
  const auto full = static_cast<int64_t>(std::llround(options_.burst * kLine));
  const auto refill =
      static_cast<int64_t>(std::llround((now_us - refilled_at_us_) * options_.per_second));
  credit_ = std::min(full, credit_ + refill);
  refilled_at_us_ = now_us;
  if (credit_ < kLine) {
    ++suppressed_since_last_;
    ++suppressed_total_;
    return false;
  }
  credit_ -= kLine;
  *suppressed = suppressed_since_last_;
  suppressed_since_last_ = 0;
  return true;
}

uint64_t LogRateLimit::suppressed_total() const {
  MutexLock lock(&mu_);
  return suppressed_total_;
}

}  // namespace verdict
