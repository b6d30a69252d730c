#include "common/log_rate_limit.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

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

std::string WithSuppressed(std::string_view line, uint64_t suppressed) {
  const std::string field = "suppressed=" + std::to_string(suppressed);
  const LogLine split = SplitLogFields(line);
  if (split.fields.empty()) return field + ": " + std::string(line);
  // After the last opening field, before the colon that ends them.
  const std::string_view last = split.fields.back().second;
  const size_t end = static_cast<size_t>(last.data() + last.size() - line.data());
  return std::string(line.substr(0, end)) + " " + field + std::string(line.substr(end));
}

}  // namespace verdict
