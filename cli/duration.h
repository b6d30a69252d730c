// Durations on the command line and in --config files: a whole number and a unit, as an
// operator writes them ("7d", "12h", "30m", "90s", "500ms"), or "off" where the option allows
// it. Stateless; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace verdict::cli {

// The longest duration accepted: a century (36500d). Every duration is a window or an interval
// that the lobby adds to or takes from the current time, in PostgreSQL (whose timestamps end in
// 4713 BC) or on a steady clock (292 years of nanoseconds); a longer one would parse and then
// fail every time it is used. "off" is how a window is kept for ever.
inline constexpr std::chrono::milliseconds kLongestDuration = std::chrono::hours(24 * 36500);

// "<digits><unit>" with unit ms, s, m, h or d, at most kLongestDuration. INVALID_ARGUMENT naming
// `text` otherwise, and the longest accepted if it is longer.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// ParseDuration, or nullopt for "off".
Result<std::optional<std::chrono::milliseconds>> ParseDurationOrOff(std::string_view text);

// The duration as ParseDuration reads it, in the largest unit that divides it ("7d", "90s",
// "0s"): how a flag shows the default an options struct holds.
std::string FormatDuration(std::chrono::milliseconds duration);

// FormatDuration, or "off" for nullopt.
std::string FormatDurationOrOff(std::optional<std::chrono::milliseconds> duration);

}  // namespace verdict::cli
