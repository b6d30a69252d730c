// The logger the library writes through: spdlog's logger named "verdict", never the default one.
//
// It is made on the first line logged, with the sinks, format and level of spdlog's default
// logger at that moment, so a program that sets up its default logger first sees verdict's lines
// there. A host that wants them elsewhere registers its own logger under the name before it
// starts a node, and the library uses that one:
//
//   spdlog::register_logger(std::make_shared<spdlog::logger>(verdict::kLoggerName, my_sink));
//
// Thread-safe. The logger is looked up once; registering another under the name after the first
// line has no effect (change the sinks of spdlog::get("verdict") instead).
//
// A line that concerns a room, a node, a shard or an answer's code opens with them, as
// `key=value` words ending in a colon, before the words meant for a person:
//
//   room=42 node=battle-07 code=ROOM_UNKNOWN: settlement refused: the room is not allocated ...
//
// Read by people as it is, and by log pipelines as fields: the JSON lines of common/json_log.h
// carry each of kLogFieldKeys as a member of its own.
#pragma once

#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

namespace verdict {

inline constexpr char kLoggerName[] = "verdict";

spdlog::logger& Log();

// The keys a line's opening words may carry. `suppressed` counts the lines of the same kind a
// rate limit held back before this one (common/log_rate_limit.h).
inline constexpr std::array<std::string_view, 6> kLogFieldKeys = {"room",     "node", "shard",
                                                                  "sequence", "code", "suppressed"};

// A line split into its opening fields and the rest.
struct LogLine {
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  std::string_view message;
};

// Splits `line` as above: the opening `key=value` words (keys of kLogFieldKeys, values without
// spaces, separated by one space, the last followed by ": "). A line that does not open so has
// no fields and is all message. The views point into `line`.
LogLine SplitLogFields(std::string_view line);

}  // namespace verdict
