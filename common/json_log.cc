#include "common/json_log.h"

#include <time.h>

#include <chrono>
#include <cstdio>

#include "common/log.h"
#include "common/utf8.h"

namespace verdict {
namespace {

void AppendMember(std::string_view key, std::string_view value, std::string* out) {
  out->push_back(',');
  AppendJsonString(key, out);
  out->push_back(':');
  AppendJsonString(value, out);
}

// "2026-05-01T12:00:00.123Z"
std::string Rfc3339Utc(std::chrono::system_clock::time_point time) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  const time_t seconds = static_cast<time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];  // ample for any int the fields can hold
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>((ms % 1000 + 1000) % 1000));
  return text;
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  while (!text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text.front());
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      *out += "\\ufffd";
      text.remove_prefix(1);
      continue;
    }
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      *out += escaped;
    } else {
      out->append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
  out->push_back('"');
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const std::string_view payload(msg.payload.data(), msg.payload.size());
  const LogLine line = SplitLogFields(payload);
  const auto level = spdlog::level::to_string_view(msg.level);
  std::string out = "{\"time\":\"" + Rfc3339Utc(msg.time) + "\"";
  AppendMember("level", std::string_view(level.data(), level.size()), &out);
  AppendMember("logger", std::string_view(msg.logger_name.data(), msg.logger_name.size()), &out);
  AppendMember("message", line.message, &out);
  for (const auto& [key, value] : line.fields) AppendMember(key, value, &out);
  out += "}\n";
  dest.append(out.data(), out.data() + out.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace verdict
