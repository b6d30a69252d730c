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

// "<digits><unit>" with unit ms, s, m, h or d. INVALID_ARGUMENT naming `text` otherwise, or if it
// does not fit in milliseconds.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// ParseDuration, or nullopt for "off".
Result<std::optional<std::chrono::milliseconds>> ParseDurationOrOff(std::string_view text);

// The duration as ParseDuration reads it, in the largest unit that divides it ("7d", "90s",
// "0s"): how a flag shows the default an options struct holds.
std::string FormatDuration(std::chrono::milliseconds duration);

// FormatDuration, or "off" for nullopt.
std::string FormatDurationOrOff(std::optional<std::chrono::milliseconds> duration);

}  // namespace verdict::cli
