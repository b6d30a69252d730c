// LogRateLimit: a token bucket for one kind of log line, so that a flood (a node whose every
// result is refused) writes a bounded number of lines: at most `burst` at once, then
// `per_second` a second. What it holds back is counted, and the next line let through says how
// many (its `suppressed=N` field, common/log.h). Thread-safe; time from the injected Clock.
#pragma once

#include <cstdint>

#include "common/clock.h"
#include "common/mutex.h"

namespace verdict {

struct LogRateLimitOptions {
  // Lines let through at once, after a quiet spell. Default: 50.
  double burst = 50;
  // Lines let through a second, on average, once the burst is spent. Default: 1.
  double per_second = 1;
  // Not owned. Default: the system clock.
  const Clock* clock = SystemClock::Default();
};

class LogRateLimit {
 public:
  explicit LogRateLimit(LogRateLimitOptions options = {});

  // Whether one more line may be written now. If it may, `*suppressed` is set to the lines held
  // back since the last one let through (for the line to say); if not, the line is counted.
  bool Admit(uint64_t* suppressed) EXCLUDES(mu_);

  // Lines held back since the limit was made.
  uint64_t suppressed_total() const EXCLUDES(mu_);

 private:
  const LogRateLimitOptions options_;
  mutable Mutex mu_;
  // Lines that may be written now, in millionths of a line: whole numbers, so that the refill
  // is exact however finely the clock moves.
  int64_t credit_ GUARDED_BY(mu_);
  int64_t refilled_at_us_ GUARDED_BY(mu_);
  uint64_t suppressed_since_last_ GUARDED_BY(mu_) = 0;
  uint64_t suppressed_total_ GUARDED_BY(mu_) = 0;
};

}  // namespace verdict
