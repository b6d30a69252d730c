#include "lobby/event_players.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/json_log.h"

namespace verdict::lobby {
namespace {

// Appends `value` as PostgreSQL's to_jsonb(value::double precision) writes it.
void AppendJsonDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    *out += "\"NaN\"";
  } else if (std::isinf(value)) {
    *out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    char text[32];
    const auto written = std::to_chars(text, text + sizeof(text), value);  // shortest round trip
    out->append(text, written.ptr);
  }
}

void AppendMember(const char* name, std::string* out) {
  out->push_back(',');
  out->push_back('"');
  *out += name;
  *out += "\":";
}

void AppendDoubleMember(const char* name, double value, std::string* out) {
  AppendMember(name, out);
  AppendJsonDouble(value, out);
}

void AppendIntegerMember(const char* name, int64_t value, std::string* out) {
  AppendMember(name, out);
  *out += std::to_string(value);
}

// round(value)::integer in PostgreSQL: rint, ties to even.
int64_t RoundedAsPostgres(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

}  // namespace

std::string EventPlayersJson(std::vector<const RatedSeat*> seats, bool elo) {
  std::sort(seats.begin(), seats.end(), [](const RatedSeat* a, const RatedSeat* b) {
    return a->player->player_id() < b->player->player_id();  // bytes, as COLLATE "C"
  });
  std::string out = "[";
  out.reserve(seats.size() * 300);
  for (const RatedSeat* s : seats) {
    if (out.size() > 1) out.push_back(',');
    // The members in the order jsonb keeps them (shorter keys first, then by bytes), so that
    // PostgreSQL's sort of each object's keys, as it reads the text, finds them sorted: unsorted,
    // that sort was 1.3 % of the machine in a drain (bench/RESULTS.md, "The lobby's own share of
    // the drain").
    out += "{\"rank\":";
    out += std::to_string(s->rank);
    AppendIntegerMember("team", s->player->team(), &out);
    AppendMember("result", &out);
    AppendJsonString(s->result, &out);
    if (elo) AppendIntegerMember("elo_after", RoundedAsPostgres(s->after.value), &out);
    AppendMember("player_id", &out);
    AppendJsonString(s->player->player_id(), &out);
    if (elo) AppendIntegerMember("elo_before", RoundedAsPostgres(s->before.value), &out);
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

}  // namespace verdict::lobby
