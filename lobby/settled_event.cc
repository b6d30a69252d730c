#include "lobby/settled_event.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

namespace verdict::lobby {
namespace {

// Appends `value` as jsonb prints a double precision: to_jsonb reads the double's own text (the
// shortest that reads back as the same double) as a numeric, and a numeric prints in plain
// decimal notation, never with an exponent, with as many decimals as its digits need; a negative
// zero prints as 0. NaN and the infinities, which a JSON number cannot hold, are strings.
void AppendJsonDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    *out += "\"NaN\"";
    return;
  }
  if (std::isinf(value)) {
    *out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  if (value == 0) {
    out->push_back('0');
    return;
  }
  char text[32];  // "-d.dddddddddddddddde-308" at most
  const auto written =
      std::to_chars(text, text + sizeof(text), value, std::chars_format::scientific);
  std::string_view scientific(text, static_cast<size_t>(written.ptr - text));
  if (scientific.front() == '-') {
    out->push_back('-');
    scientific.remove_prefix(1);
  }
  const size_t e = scientific.find('e');
  char digits[20];  // the significant digits, without the point: value = 0.digits × 10^point
  int n = 0;
  for (char c : scientific.substr(0, e)) {
    if (c != '.') digits[n++] = c;
  }
  std::string_view exponent_text = scientific.substr(e + 1);
  if (exponent_text.front() == '+') exponent_text.remove_prefix(1);
  int exponent = 0;
  std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    *out += "0.";
    out->append(static_cast<size_t>(-point), '0');
    out->append(digits, static_cast<size_t>(n));
  } else if (point >= n) {
    out->append(digits, static_cast<size_t>(n));
    out->append(static_cast<size_t>(point - n), '0');
  } else {
    out->append(digits, static_cast<size_t>(point));
    out->push_back('.');
    out->append(digits + point, static_cast<size_t>(n - point));
  }
}

// Appends `text` as jsonb prints a string (PostgreSQL's escape_json): '"' and '\\' escaped, \b
// \f \n \r \t by name, any other byte below 0x20 as \u00xx, every other byte as it is (ids are
// checked to be UTF-8 before they get here).
void AppendStringAsJsonb(std::string_view text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          constexpr char kHex[] = "0123456789abcdef";
          *out += "\\u00";
          out->push_back(kHex[(c >> 4) & 0xf]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Each member after an object's first, as jsonb prints them: ", " before, ": " after the key.
void AppendMember(const char* name, std::string* out) {
  *out += ", \"";
  *out += name;
  *out += "\": ";
}

void AppendDoubleMember(const char* name, double value, std::string* out) {
  AppendMember(name, out);
  AppendJsonDouble(value, out);
}

void AppendIntegerMember(const char* name, int64_t value, std::string* out) {
  AppendMember(name, out);
  *out += std::to_string(value);
}

// round(value)::integer in PostgreSQL: rint, ties to even. A value beyond an integer's range,
// which PostgreSQL refuses and no rating within its bounds is (a row stored before they were
// kept may be), saturates rather than overflows.
int64_t RoundedAsPostgres(double value) {
  const double rounded = std::nearbyint(value);
  if (std::isnan(rounded)) return 0;
  constexpr double kLeast = std::numeric_limits<int32_t>::min();
  constexpr double kMost = std::numeric_limits<int32_t>::max();
  return static_cast<int64_t>(std::clamp(rounded, kLeast, kMost));
}

}  // namespace

std::string EventPlayersJson(std::vector<const RatedSeat*> seats, bool integer_elo) {
  std::sort(seats.begin(), seats.end(), [](const RatedSeat* a, const RatedSeat* b) {
    return a->player->player_id() < b->player->player_id();  // bytes, as COLLATE "C"
  });
  std::string out = "[";
  out.reserve(seats.size() * 300);
  for (const RatedSeat* s : seats) {
    if (out.size() > 1) out += ", ";
    // The members in the order jsonb keeps them (shorter keys first, then by bytes): the order
    // the feed has always served them in, which the event is stored in as it is (migration 007).
    out += "{\"rank\": ";
    out += std::to_string(s->rank);
    AppendIntegerMember("team", s->player->team(), &out);
    AppendMember("result", &out);
    AppendStringAsJsonb(s->result, &out);
    if (integer_elo) AppendIntegerMember("elo_after", RoundedAsPostgres(s->after.value), &out);
    AppendMember("player_id", &out);
    AppendStringAsJsonb(s->player->player_id(), &out);
    if (integer_elo) AppendIntegerMember("elo_before", RoundedAsPostgres(s->before.value), &out);
    AppendDoubleMember("rating_after", s->after.value, &out);
    AppendDoubleMember("rating_before", s->before.value, &out);
    AppendDoubleMember("deviation_after", s->after.deviation, &out);
    AppendDoubleMember("deviation_before", s->before.deviation, &out);
    AppendDoubleMember("volatility_after", s->after.volatility, &out);
    AppendDoubleMember("volatility_before", s->before.volatility, &out);
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

std::string SettledEventJson(const SettledEvent& event, std::string_view players_json) {
  std::string out;
  out.reserve(players_json.size() + 256);
  out += "{\"mode\": ";
  AppendStringAsJsonb(event.mode, &out);
  out += ", \"type\": \"battle.settled\"";
  AppendMember("outcome", &out);
  AppendStringAsJsonb(event.outcome, &out);
  AppendMember("players", &out);
  out += players_json;
  AppendMember("room_id", &out);
  AppendStringAsJsonb(std::to_string(event.room_id), &out);
  AppendMember("suspect", &out);
  out += event.suspect ? "true" : "false";
  AppendMember("match_id", &out);
  AppendStringAsJsonb(std::to_string(event.match_id), &out);
  AppendIntegerMember("winner_team", event.winner_team, &out);
  AppendMember("settled_at_ms", &out);
  AppendStringAsJsonb(std::to_string(event.settled_at_ms), &out);
  out.push_back('}');
  return out;
}

}  // namespace verdict::lobby
