#include "common/json_log.h"

#include <time.h>

#include <chrono>
#include <cstdio>

#include "common/log.h"

namespace verdict {
namespace {

// The length of the valid UTF-8 sequence that starts `text`, or 0 if it does not start with one
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

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
