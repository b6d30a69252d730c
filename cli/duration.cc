#include "cli/duration.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

namespace verdict::cli {

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  const auto invalid = [&] {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not a duration: a whole number and ms, s, m, h or d "
                                "(e.g. 7d, 90s)");
  };
  int64_t count = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec != std::errc() || end == text.data() || count < 0) return invalid();
  const std::string_view unit(end, text.data() + text.size() - end);
  int64_t ms_per_unit = 0;
  if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "s") {
    ms_per_unit = 1000;
  } else if (unit == "m") {
    ms_per_unit = 60 * 1000;
  } else if (unit == "h") {
    ms_per_unit = 3600 * 1000;
  } else if (unit == "d") {
    ms_per_unit = 24 * 3600 * 1000;
  } else {
    return invalid();
  }
  if (count > kLongestDuration.count() / ms_per_unit) {
    return InvalidArgumentError("'" + std::string(text) + "' is longer than " +
                                FormatDuration(kLongestDuration) + ", the longest accepted");
  }
  return std::chrono::milliseconds(count * ms_per_unit);
}

Result<std::optional<std::chrono::milliseconds>> ParseDurationOrOff(std::string_view text) {
  if (text == "off") return std::optional<std::chrono::milliseconds>();
  auto parsed = ParseDuration(text);
  if (!parsed.ok()) {
    return InvalidArgumentError(parsed.status().message() + ", or off");
  }
  return std::optional<std::chrono::milliseconds>(*parsed);
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  if (ms == 0) return "0s";
  for (const auto& [unit, ms_per_unit] : {std::pair<const char*, int64_t>{"d", 24 * 3600 * 1000},
                                          {"h", 3600 * 1000},
                                          {"m", 60 * 1000},
                                          {"s", 1000}}) {
    if (ms % ms_per_unit == 0) return std::to_string(ms / ms_per_unit) + unit;
  }
  return std::to_string(ms) + "ms";
}

std::string FormatDurationOrOff(std::optional<std::chrono::milliseconds> duration) {
  return duration ? FormatDuration(*duration) : "off";
}

}  // namespace verdict::cli
