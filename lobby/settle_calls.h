// The two statements of a settlement (docs/design.md §5), declared once for every C++ caller (the
// lobby's store, the bench and the tests): verdict_settle_prepare judges the rooms and reads the
// ratings under the rooms' and players' locks, verdict_settle_write writes what the lobby
// computed from them. The SQL files say what each parameter means; tests/lobby/schema_test.cc
// holds these lists equal to the functions' own. Constant data: any thread.
#pragma once

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

inline constexpr pg::SqlFunction kSettleWrite{
    "verdict_settle_write", std::array<pg::SqlParameter, 39>{{
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
                                {"p_event_players", "text[]"},  // sent in binary
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
                            }}};

}  // namespace verdict::lobby
