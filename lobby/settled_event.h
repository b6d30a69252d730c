// The battle.settled event (docs/lobby.md, "Events"), built whole, as JSON text, in this one
// place: verdict_settle_write stores it as it is (migration 007), and the feed serves it as
// stored. Its players were built in the write by jsonb functions, one object of eleven members a
// player, and cost a quarter of a drain's database time (bench/RESULTS.md, "The event's players,
// built once"); the envelope was then built in SQL around the players the lobby wrote, so the
// event had two homes in two languages. Now verdict_settle_prepare hands the lobby each new
// match's id and the call's time, and the lobby writes every byte.
//
// The text is what jsonb printed for the events stored before, byte for byte, so the feed serves
// old and new alike: each number as jsonb prints a double precision (its shortest round-trip
// digits, in plain decimal notation; NaN and the infinities as strings), strings escaped as jsonb
// escapes them, the players in byte order of their ids, Elo's rounded elo_before and elo_after,
// each object's members in jsonb's key order (shorter keys first, then by bytes) with ", " and
// ": " between them. tests/lobby/batch_settlement_test.cc holds both parts equal to what
// PostgreSQL builds from the same values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/settlement_ratings.h"

namespace verdict::lobby {

// The players of one room, any order, as a JSON array; `integer_elo`: the room's system reports
// integer Elo (rating::RatingSystem::ReportsIntegerElo), which the event then carries as
// elo_before and elo_after.
std::string EventPlayersJson(std::vector<const RatedSeat*> seats, bool integer_elo);

// One room's settlement, as its event tells it.
struct SettledEvent {
  std::string_view mode;
  std::string_view outcome;  // "SETTLED" or "ABORTED"
  uint64_t room_id = 0;
  uint64_t match_id = 0;
  uint32_t winner_team = 0;  // the team placed first alone, 0 if none
  bool suspect = false;
  int64_t settled_at_ms = 0;
};

// The whole event, its players `players_json` (EventPlayersJson's). The ids and the time are
// strings, as the feed has always served them (a JSON reader may hold a number in a double).
std::string SettledEventJson(const SettledEvent& event, std::string_view players_json);

}  // namespace verdict::lobby
