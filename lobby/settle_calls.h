// The two statements of a settlement (docs/design.md §5), declared once for every C++ caller (the
// lobby's store, the bench and the tests): verdict_settle_prepare judges the rooms and reads the
// ratings under the rooms' and players' locks, verdict_settle_write writes what the lobby
// computed from them. The SQL files say what each parameter means; tests/lobby/schema_test.cc
// holds these lists equal to the functions' own. Beside each, the typed rows the lobby sends it
// in binary (lobby/pg/binary_call.h), each member tied to its parameter once, in its Columns():
// the compiler checks that they cover every parameter once, each of its own SQL type. Constant
// data and value types: any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "lobby/pg/binary_call.h"
#include "lobby/pg/sql_function.h"

namespace verdict::lobby {

inline constexpr pg::SqlFunction kSettlePrepare{"verdict_settle_prepare",
                                                std::array<pg::SqlParameter, 8>{{
                                                    // One element per room.
                                                    {"p_room_ids", "bigint[]"},
                                                    {"p_node_ids", "text[]"},
                                                    {"p_outcomes", "text[]"},
                                                    {"p_fingerprints", "bytea[]"},
                                                    // One element per player of every room.
                                                    {"p_player_rooms", "bigint[]"},
                                                    {"p_player_ids", "text[]"},
                                                    {"p_teams", "smallint[]"},
                                                    // The call's own.
                                                    {"p_wait", "boolean"},
                                                }}};

// verdict_settle_prepare's rows: one per room, one per player of every room, and the call's own.
struct SettlePrepareRoom {
  int64_t room_id = 0;
  std::string_view node_id;
  std::string_view outcome;  // "SETTLED" or "ABORTED"
  pg::Bytea fingerprint;
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_room_ids", &SettlePrepareRoom::room_id},
                      pg::Column{"p_node_ids", &SettlePrepareRoom::node_id},
                      pg::Column{"p_outcomes", &SettlePrepareRoom::outcome},
                      pg::Column{"p_fingerprints", &SettlePrepareRoom::fingerprint}};
  }
};

struct SettlePreparePlayer {
  int64_t room_id = 0;
  std::string_view player_id;
  int16_t team = 0;
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_player_rooms", &SettlePreparePlayer::room_id},
                      pg::Column{"p_player_ids", &SettlePreparePlayer::player_id},
                      pg::Column{"p_teams", &SettlePreparePlayer::team}};
  }
};

struct SettlePrepareScalars {
  bool wait = false;
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_wait", &SettlePrepareScalars::wait}};
  }
};

using SettlePrepareCall =
    pg::BinaryCall<kSettlePrepare, SettlePrepareScalars, SettlePrepareRoom, SettlePreparePlayer>;
static_assert(SettlePrepareCall::kChecked);

inline constexpr pg::SqlFunction kSettleWrite{
    "verdict_settle_write", std::array<pg::SqlParameter, 41>{{
                                // One element per room written.
                                {"p_room_ids", "bigint[]"},
                                {"p_node_ids", "text[]"},
                                {"p_outcomes", "text[]"},
                                {"p_winner_teams", "smallint[]"},
                                {"p_suspects", "boolean[]"},
                                {"p_ended_at_ms", "bigint[]"},
                                {"p_replay_paths", "text[]"},
                                {"p_abort_reasons", "text[]"},
                                {"p_fingerprints", "bytea[]"},
                                {"p_modes", "text[]"},
                                {"p_match_ids", "bigint[]"},
                                {"p_events", "text[]"},
                                // One element per player of those rooms.
                                {"p_player_rooms", "bigint[]"},
                                {"p_player_ids", "text[]"},
                                {"p_teams", "smallint[]"},
                                {"p_ranks", "smallint[]"},
                                {"p_kills", "integer[]"},
                                {"p_deaths", "integer[]"},
                                {"p_assists", "integer[]"},
                                {"p_scores", "bigint[]"},
                                {"p_disconnected", "boolean[]"},
                                {"p_results", "text[]"},
                                {"p_ratings_before", "double precision[]"},
                                {"p_ratings_after", "double precision[]"},
                                {"p_deviations_before", "double precision[]"},
                                {"p_deviations_after", "double precision[]"},
                                {"p_volatilities_before", "double precision[]"},
                                {"p_volatilities_after", "double precision[]"},
                                // One element per distinct (mode, player) of those rooms.
                                {"p_rated_modes", "text[]"},
                                {"p_rated_players", "text[]"},
                                {"p_final_ratings", "double precision[]"},
                                {"p_final_deviations", "double precision[]"},
                                {"p_final_volatilities", "double precision[]"},
                                {"p_final_displayed", "double precision[]"},
                                {"p_games", "integer[]"},
                                {"p_wins", "integer[]"},
                                {"p_losses", "integer[]"},
                                {"p_draws", "integer[]"},
                                {"p_placements", "integer[]"},
                                // The call's own.
                                {"p_attempt_id", "bigint"},
                                {"p_settled_at_ms", "bigint"},
                            }}};

// verdict_settle_write's rows: one per room written, one per player of those rooms, one per
// distinct (mode, player) of them, and the call's own.
struct SettleWriteRoom {
  int64_t room_id = 0;
  std::string_view node_id;
  std::string_view outcome;  // "SETTLED" or "ABORTED"
  int16_t winner_team = 0;
  bool suspect = false;
  int64_t ended_at_ms = 0;
  std::string_view replay_path;
  std::string_view abort_reason;
  pg::Bytea fingerprint;
  std::string_view mode;
  int64_t match_id = 0;  // the id verdict_settle_prepare took for the room's match
  std::string event;     // the room's battle.settled event (lobby/settled_event.h)
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_room_ids", &SettleWriteRoom::room_id},
                      pg::Column{"p_node_ids", &SettleWriteRoom::node_id},
                      pg::Column{"p_outcomes", &SettleWriteRoom::outcome},
                      pg::Column{"p_winner_teams", &SettleWriteRoom::winner_team},
                      pg::Column{"p_suspects", &SettleWriteRoom::suspect},
                      pg::Column{"p_ended_at_ms", &SettleWriteRoom::ended_at_ms},
                      pg::Column{"p_replay_paths", &SettleWriteRoom::replay_path},
                      pg::Column{"p_abort_reasons", &SettleWriteRoom::abort_reason},
                      pg::Column{"p_fingerprints", &SettleWriteRoom::fingerprint},
                      pg::Column{"p_modes", &SettleWriteRoom::mode},
                      pg::Column{"p_match_ids", &SettleWriteRoom::match_id},
                      pg::Column{"p_events", &SettleWriteRoom::event}};
  }
};

struct SettleWriteSeat {
  int64_t room_id = 0;
  std::string_view player_id;
  int16_t team = 0;
  int16_t rank = 0;
  int32_t kills = 0;
  int32_t deaths = 0;
  int32_t assists = 0;
  int64_t score = 0;
  bool disconnected = false;
  std::string_view result;  // "win", "draw", "loss" or "aborted"
  double rating_before = 0;
  double rating_after = 0;
  double deviation_before = 0;
  double deviation_after = 0;
  double volatility_before = 0;
  double volatility_after = 0;
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_player_rooms", &SettleWriteSeat::room_id},
                      pg::Column{"p_player_ids", &SettleWriteSeat::player_id},
                      pg::Column{"p_teams", &SettleWriteSeat::team},
                      pg::Column{"p_ranks", &SettleWriteSeat::rank},
                      pg::Column{"p_kills", &SettleWriteSeat::kills},
                      pg::Column{"p_deaths", &SettleWriteSeat::deaths},
                      pg::Column{"p_assists", &SettleWriteSeat::assists},
                      pg::Column{"p_scores", &SettleWriteSeat::score},
                      pg::Column{"p_disconnected", &SettleWriteSeat::disconnected},
                      pg::Column{"p_results", &SettleWriteSeat::result},
                      pg::Column{"p_ratings_before", &SettleWriteSeat::rating_before},
                      pg::Column{"p_ratings_after", &SettleWriteSeat::rating_after},
                      pg::Column{"p_deviations_before", &SettleWriteSeat::deviation_before},
                      pg::Column{"p_deviations_after", &SettleWriteSeat::deviation_after},
                      pg::Column{"p_volatilities_before", &SettleWriteSeat::volatility_before},
                      pg::Column{"p_volatilities_after", &SettleWriteSeat::volatility_after}};
  }
};

struct SettleWriteTotals {
  std::string_view mode;
  std::string_view player_id;
  double rating = 0;
  double deviation = 0;
  double volatility = 0;
  double displayed = 0;
  int32_t games = 0;
  int32_t wins = 0;
  int32_t losses = 0;
  int32_t draws = 0;
  int32_t placements = 0;  // the ranks placed, summed
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_rated_modes", &SettleWriteTotals::mode},
                      pg::Column{"p_rated_players", &SettleWriteTotals::player_id},
                      pg::Column{"p_final_ratings", &SettleWriteTotals::rating},
                      pg::Column{"p_final_deviations", &SettleWriteTotals::deviation},
                      pg::Column{"p_final_volatilities", &SettleWriteTotals::volatility},
                      pg::Column{"p_final_displayed", &SettleWriteTotals::displayed},
                      pg::Column{"p_games", &SettleWriteTotals::games},
                      pg::Column{"p_wins", &SettleWriteTotals::wins},
                      pg::Column{"p_losses", &SettleWriteTotals::losses},
                      pg::Column{"p_draws", &SettleWriteTotals::draws},
                      pg::Column{"p_placements", &SettleWriteTotals::placements}};
  }
};

struct SettleWriteScalars {
  int64_t attempt_id = 0;
  int64_t settled_at_ms = 0;  // the call's time, as verdict_settle_prepare gave it
  static constexpr auto Columns() {
    return std::tuple{pg::Column{"p_attempt_id", &SettleWriteScalars::attempt_id},
                      pg::Column{"p_settled_at_ms", &SettleWriteScalars::settled_at_ms}};
  }
};

using SettleWriteCall = pg::BinaryCall<kSettleWrite, SettleWriteScalars, SettleWriteRoom,
                                       SettleWriteSeat, SettleWriteTotals>;
static_assert(SettleWriteCall::kChecked);

}  // namespace verdict::lobby
