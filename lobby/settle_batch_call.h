// The call of verdict_settle_batch (sql/functions/verdict_settle_batch.sql), built from its
// parameter list, declared here once for every C++ caller: the lobby's store, the bench and the
// tests. A test checks the list against the parameters PostgreSQL records for the function
// (tests/lobby/schema_test.cc). Constant data and pure functions: any thread.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace verdict::lobby {

// One parameter of an SQL function: its name and its type as PostgreSQL spells it
// (pg_get_function_identity_arguments).
struct SqlParameter {
  std::string_view name;
  std::string_view type;
};

// verdict_settle_batch's parameters, in order. The SQL file says what each means.
inline constexpr SqlParameter kSettleBatchParameters[] = {
    // One element per room.
    {"p_room_ids", "bigint[]"},
    {"p_node_ids", "text[]"},
    {"p_outcomes", "text[]"},
    {"p_winner_teams", "smallint[]"},
    {"p_suspects", "boolean[]"},
    {"p_ended_at_ms", "bigint[]"},
    {"p_replay_paths", "text[]"},
    {"p_abort_reasons", "text[]"},
    {"p_fingerprints", "bytea[]"},
    // One element per player of every room.
    {"p_player_rooms", "bigint[]"},
    {"p_player_ids", "bigint[]"},
    {"p_teams", "smallint[]"},
    {"p_kills", "integer[]"},
    {"p_deaths", "integer[]"},
    {"p_assists", "integer[]"},
    {"p_scores", "bigint[]"},
    {"p_disconnected", "boolean[]"},
    // The call's own.
    {"p_k_factor", "integer"},
    {"p_attempt_id", "bigint"},
    {"p_wait", "boolean"},
};

// One call's arguments, each at its parameter's index (SettleBatchArg).
using SettleBatchArgs = std::array<std::string, std::size(kSettleBatchParameters)>;

// The index of the parameter named `name`. A name not in the list does not compile.
consteval size_t SettleBatchArg(std::string_view name) {
  for (size_t i = 0; i < std::size(kSettleBatchParameters); ++i) {
    if (kSettleBatchParameters[i].name == name) return i;
  }
  throw "verdict_settle_batch has no parameter of that name";
}

// "verdict_settle_batch((a1)::bigint[], (a2)::text[], …)": each of `sql` (an SQL expression, such
// as "$1" or "p.kills") passed as its parameter, cast to the parameter's type. An argument left
// empty makes a statement PostgreSQL refuses.
std::string SettleBatchCall(const SettleBatchArgs& sql);

// SettleBatchCall with the placeholders $1 … $20, for a prepared statement whose parameters are
// the arguments in the list's order.
std::string SettleBatchPreparedCall();

// The list as pg_get_function_identity_arguments writes it: "p_room_ids bigint[], …".
std::string SettleBatchIdentityArguments();

}  // namespace verdict::lobby
