// LogRateLimit: a token bucket for one kind of log line, so that a flood (a node whose every
// result is refused) writes a bounded number of lines: at most `burst` at once, then
// `per_second` a second. What it holds back is counted, and the next line let through says how
// many (its `suppressed=N` field, common/log.h). LogLimited writes a line through one: every
// warning that a fault can repeat (per room, per request, per attempt) of the node and the lobby
// goes through it. Thread-safe; time from the injected Clock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/logger.h>

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

// For a warning that a fault repeats in the same words (the database away, a disk full): a
// few lines, then one a second.
inline LogRateLimitOptions RepeatedFaultLimit(const Clock* clock = SystemClock::Default()) {
  return {.burst = 10, .per_second = 1, .clock = clock};
}

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

// `line` with `suppressed=N` added as the last of its opening fields (common/log.h), or opening
// the line when it has none.
std::string WithSuppressed(std::string_view line, uint64_t suppressed);

// Writes one line of the kind `limit` counts through `logger` at `level`, if the logger writes
// that level and the limit admits it; a line let through after others were held back says how
// many. A line held back is not formatted.
template <typename... Args>
void LogLimited(spdlog::logger& logger, LogRateLimit& limit, spdlog::level::level_enum level,
                spdlog::format_string_t<Args...> format, Args&&... args) {
  uint64_t suppressed = 0;
  if (!logger.should_log(level) || !limit.Admit(&suppressed)) return;
  if (suppressed == 0) return logger.log(level, format, std::forward<Args>(args)...);
  logger.log(level, "{}",
             WithSuppressed(fmt::format(format, std::forward<Args>(args)...), suppressed));
}

}  // namespace verdict
