// JSON log lines for log pipelines (`--log-format json`): an spdlog formatter that writes each
// line as one JSON object on one line,
//
//   {"time":"2026-05-01T12:00:00.123Z","level":"warning","logger":"lobby",
//    "message":"settlement refused: ...","room":"42","node":"battle-07","code":"ROOM_UNKNOWN"}
//
// time in UTC to the millisecond, spdlog's level name, the logger's name, the message, and the
// fields a line opens with (common/log.h), each a string. Newlines, control characters (a
// terminal's escape sequences among them) and invalid UTF-8 are escaped, so a multi-line
// database error is one object and no text can forge a line. Stateless; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>

namespace verdict {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// Appends `text` to `out` as a JSON string, quotes included, escaped as above (a byte that is
// not part of valid UTF-8 becomes U+FFFD).
void AppendJsonString(std::string_view text, std::string* out);

}  // namespace verdict
