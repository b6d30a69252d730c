// pgbench running the lobby's settlement transaction, or the old single-room design's function,
// against the bench's rooms: the PostgreSQL ceilings the drain is measured against.
#include "bench/pgbench_settle.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <vector>

#include "bench/backlog.h"
#include "lobby/settle_calls.h"
#include "lobby/settled_event.h"
#include "lobby/settlement_ratings.h"
#include "reference_settle_sql.h"

namespace verdict::bench {
namespace {

constexpr const char* kNode = kBacklogNode;

// The rooms of call `call` (an SQL expression: a pgbench variable, nextval, a number) and their
// players, as the start of a query whose FROM list ends in the row of arrays p and a LATERAL
// for the settlement's call: rooms base + call * batch + 1 … + batch, each seating the players
// ResultFor gives it.
std::string RoomsOfCall(uint64_t base, size_t batch, const std::string& call) {
  const std::string b = std::to_string(batch);
  return "SELECT count(*) FROM (SELECT " + call +
         " AS k) c,\n"
         "LATERAL (SELECT array_agg(c.k * " +
         b +
         " + i ORDER BY i) AS slots FROM "
         "generate_series(1, " +
         b +
         ") i) r,\n"
         "LATERAL (SELECT array_agg(" +
         std::to_string(base) +
         " + slot ORDER BY slot, g) AS rooms,\n"
         "  array_agg((slot * 10 + g)::text ORDER BY slot, g) AS ids,\n"
         "  array_agg(CASE WHEN g <= 5 THEN 1 ELSE 2 END::smallint ORDER BY slot, g) AS teams,\n"
         "  array_agg(g ORDER BY slot, g) AS kills, array_agg(0 ORDER BY slot, g) AS zeros,\n"
         "  array_agg(100 * g::bigint ORDER BY slot, g) AS scores,\n"
         "  array_agg(false ORDER BY slot, g) AS disconnected\n"
         "  FROM unnest(r.slots) slot, generate_series(1, 10) g) p,\n"
         "LATERAL ";
}

}  // namespace

BenchSettle BenchSettleStatements(uint64_t base, size_t batch, const std::string& call) {
  const BenchSettle calls = BenchSettleCalls(
      "ARRAY(SELECT " + std::to_string(base) + " + slot FROM unnest(r.slots) slot)",
      std::to_string(batch));
  return {RoomsOfCall(base, batch, call) + calls.prepare + " s WHERE s.status = 'settle'",
          RoomsOfCall(base, batch, call) + calls.write + " w"};
}

double RunPgbench(const std::string& conninfo, const std::string& dir, uint64_t base, uint64_t n,
                  uint32_t clients, size_t batch, PgbenchStatement statement) {
  if (statement == PgbenchStatement::kReference) batch = 1;
  const uint64_t calls = std::max<uint64_t>(1, n / batch / clients);
  std::fprintf(
      stderr, "  pgbench %s: %u clients, %llu calls each of %zu room%s\n",
      statement == PgbenchStatement::kReference ? "reference (single-room design)" : "ceiling",
      clients, static_cast<unsigned long long>(calls), batch, batch == 1 ? "" : "s");
  AllocateRooms(conninfo, base, calls * clients * batch);
  {
    pqxx::connection conn(conninfo);
    pqxx::nontransaction tx(conn);
    tx.exec("DROP SEQUENCE IF EXISTS verdict_bench_calls");
    tx.exec("CREATE SEQUENCE verdict_bench_calls MINVALUE 0 START 0");
    if (statement == PgbenchStatement::kReference) tx.exec(kReferenceSettleSql);
  }
  std::filesystem::create_directories(dir);
  const std::string script = dir + "/settle.sql";
  std::ofstream file(script);
  if (statement == PgbenchStatement::kReference) {
    // The frozen reference's own positional call (bench/reference_settle.sql), not the lobby's.
    file << RoomsOfCall(base, batch, "nextval('verdict_bench_calls')")
         << "verdict_bench_settle_one(" << base << " + c.k + 1, '" << kNode
         << "', 'SETTLED', 1::smallint, false, 1700000000000, 'replays/bench', '',\n"
            "  decode(repeat('ab', 32), 'hex'), p.ids, p.teams, p.kills, p.zeros, p.zeros, "
            "p.scores,\n  p.disconnected, 32) s WHERE s.status = 'settled';\n";
  } else {
    // The lobby's own transaction: its two statements, for the same rooms.
    const BenchSettle statements = BenchSettleStatements(base, batch, ":k");
    file << "SELECT nextval('verdict_bench_calls') AS k \\gset\nBEGIN;\n"
         << statements.prepare << ";\n"
         << statements.write << ";\nEND;\n";
  }
  file.close();  // pgbench reads it next
  const std::string command = "pgbench -n -c " + std::to_string(clients) + " -j 2 -t " +
                              std::to_string(calls) + " -f " + script + " '" + conninfo + "' 2>&1";
  FILE* out = ::popen(command.c_str(), "r");
  std::string text;
  char buf[4096];
  while (out && std::fgets(buf, sizeof(buf), out)) text += buf;
  if (out) ::pclose(out);
  const size_t tps = text.find("tps = ");
  if (tps == std::string::npos) {
    std::fprintf(stderr, "pgbench failed:\n%s\n", text.c_str());
    return 0;
  }
  const uint64_t settled = ReceiptsBetween(conninfo, base, calls * clients * batch);
  if (settled < calls * clients * batch) {
    std::fprintf(stderr, "    warning: pgbench settled %llu of %llu rooms\n",
                 static_cast<unsigned long long>(settled),
                 static_cast<unsigned long long>(calls * clients * batch));
  }
  return std::stod(text.substr(tps + 6)) * batch;
}

// The "players" of a 2x5 room's event as the lobby builds them (lobby/settled_event.h), team 1
// winning 16 at equal ratings, as a format() template whose player ids carry the room (%1$s).
std::string EventPlayersTemplate() {
  std::vector<v1::PlayerResult> players(10);
  std::vector<lobby::RatedSeat> seats;
  for (int g = 1; g <= 10; ++g) {
    players[g - 1].set_player_id("%1$s." + std::to_string(g));
    players[g - 1].set_team(g <= 5 ? 1 : 2);
  }
  for (const v1::PlayerResult& p : players) {
    const bool won = p.team() == 1;
    seats.push_back(
        {0, &p, won ? 1u : 2u, won ? "win" : "loss", {1500, 0, 0}, {won ? 1516.0 : 1484.0, 0, 0}});
  }
  std::vector<const lobby::RatedSeat*> room;
  for (const lobby::RatedSeat& s : seats) room.push_back(&s);
  return lobby::EventPlayersJson(room, true);
}

// The room's whole battle.settled event as the lobby builds it (lobby/settled_event.h), as a
// format() template: the players of EventPlayersTemplate, the room %1$s, its match %2$s and the
// settlement time %3$s.
std::string EventTemplate() {
  constexpr uint64_t kRoom = 111111, kMatch = 222222;
  constexpr int64_t kTime = 333333;
  std::string event = lobby::SettledEventJson({.mode = "default",
                                               .outcome = "SETTLED",
                                               .room_id = kRoom,
                                               .match_id = kMatch,
                                               .winner_team = 1,
                                               .suspect = false,
                                               .settled_at_ms = kTime},
                                              EventPlayersTemplate());
  for (const auto& [number, placeholder] :
       {std::pair{std::to_string(kRoom), "%1$s"}, std::pair{std::to_string(kMatch), "%2$s"},
        std::pair{std::to_string(kTime), "%3$s"}}) {
    const std::string quoted = "\"" + number + "\"";
    event.replace(event.find(quoted), quoted.size(), std::string("\"") + placeholder + "\"");
  }
  return event;
}

BenchSettle BenchSettleCalls(const std::string& rooms, const std::string& count) {
  const std::string fill = "ARRAY[" + count + "]";
  const auto fill_of = [&fill](const std::string& value) {
    return "array_fill(" + value + ", " + fill + ")";
  };
  const std::string players = "ARRAY[cardinality(p.ids)]";
  // Per player of the rooms, from the teams: team 1 wins 16, team 2 loses 16 (equal teams).
  const auto by_team = [](const std::string& one, const std::string& two) {
    return "ARRAY(SELECT CASE WHEN t.team = 1 THEN " + one + " ELSE " + two +
           " END FROM unnest(p.teams) WITH ORDINALITY AS t(team, i) ORDER BY t.i)";
  };
  BenchSettle calls;
  decltype(lobby::kSettlePrepare)::Args prepare;
  prepare[lobby::kSettlePrepare["p_room_ids"]] = rooms;
  prepare[lobby::kSettlePrepare["p_node_ids"]] = fill_of("'" + std::string(kNode) + "'::text");
  prepare[lobby::kSettlePrepare["p_outcomes"]] = fill_of("'SETTLED'::text");
  prepare[lobby::kSettlePrepare["p_fingerprints"]] = fill_of("decode(repeat('ab', 32), 'hex')");
  prepare[lobby::kSettlePrepare["p_player_rooms"]] = "p.rooms";
  prepare[lobby::kSettlePrepare["p_player_ids"]] = "p.ids";
  prepare[lobby::kSettlePrepare["p_teams"]] = "p.teams";
  prepare[lobby::kSettlePrepare["p_wait"]] = "true";
  calls.prepare = lobby::kSettlePrepare.Call(prepare);
  decltype(lobby::kSettleWrite)::Args write;
  write[lobby::kSettleWrite["p_room_ids"]] = rooms;
  write[lobby::kSettleWrite["p_node_ids"]] = fill_of("'" + std::string(kNode) + "'::text");
  write[lobby::kSettleWrite["p_outcomes"]] = fill_of("'SETTLED'::text");
  write[lobby::kSettleWrite["p_winner_teams"]] = fill_of("1::smallint");
  write[lobby::kSettleWrite["p_suspects"]] = fill_of("false");
  write[lobby::kSettleWrite["p_ended_at_ms"]] = fill_of("1700000000000::bigint");
  write[lobby::kSettleWrite["p_replay_paths"]] = fill_of("'replays/bench'::text");
  write[lobby::kSettleWrite["p_abort_reasons"]] = fill_of("''::text");
  write[lobby::kSettleWrite["p_fingerprints"]] = fill_of("decode(repeat('ab', 32), 'hex')");
  write[lobby::kSettleWrite["p_modes"]] = fill_of("'default'::text");
  // The new matches' ids and the call's time from m (below), each room's event as text, as the
  // lobby's parameters are.
  write[lobby::kSettleWrite["p_match_ids"]] = "m.ids";
  write[lobby::kSettleWrite["p_settled_at_ms"]] = "m.ms";
  write[lobby::kSettleWrite["p_events"]] = "ARRAY(SELECT format('" + EventTemplate() +
                                           "', x.r, x.id, m.ms) FROM unnest(" + rooms +
                                           ", m.ids) WITH ORDINALITY AS x(r, id, i) ORDER BY x.i)";
  write[lobby::kSettleWrite["p_player_rooms"]] = "p.rooms";
  write[lobby::kSettleWrite["p_player_ids"]] = "p.ids";
  write[lobby::kSettleWrite["p_teams"]] = "p.teams";
  write[lobby::kSettleWrite["p_kills"]] = "p.kills";
  write[lobby::kSettleWrite["p_deaths"]] = "p.zeros";
  write[lobby::kSettleWrite["p_assists"]] = "p.zeros";
  write[lobby::kSettleWrite["p_scores"]] = "p.scores";
  write[lobby::kSettleWrite["p_disconnected"]] = "p.disconnected";
  write[lobby::kSettleWrite["p_ranks"]] = by_team("1::smallint", "2::smallint");
  write[lobby::kSettleWrite["p_results"]] = by_team("'win'", "'loss'");
  write[lobby::kSettleWrite["p_ratings_before"]] = "array_fill(1500::float8, " + players + ")";
  write[lobby::kSettleWrite["p_ratings_after"]] = by_team("1516::float8", "1484::float8");
  const std::string zeros = "array_fill(0::float8, " + players + ")";
  write[lobby::kSettleWrite["p_deviations_before"]] = zeros;
  write[lobby::kSettleWrite["p_deviations_after"]] = zeros;
  write[lobby::kSettleWrite["p_volatilities_before"]] = zeros;
  write[lobby::kSettleWrite["p_volatilities_after"]] = zeros;
  write[lobby::kSettleWrite["p_final_deviations"]] = zeros;
  write[lobby::kSettleWrite["p_final_volatilities"]] = zeros;
  write[lobby::kSettleWrite["p_rated_modes"]] = "array_fill('default'::text, " + players + ")";
  write[lobby::kSettleWrite["p_rated_players"]] = "p.ids";
  write[lobby::kSettleWrite["p_final_ratings"]] = by_team("1516::float8", "1484::float8");
  write[lobby::kSettleWrite["p_final_displayed"]] = by_team("1516::float8", "1484::float8");
  write[lobby::kSettleWrite["p_games"]] = "array_fill(1, " + players + ")";
  write[lobby::kSettleWrite["p_wins"]] = by_team("1", "0");
  write[lobby::kSettleWrite["p_losses"]] = by_team("0", "1");
  write[lobby::kSettleWrite["p_draws"]] = "array_fill(0, " + players + ")";
  write[lobby::kSettleWrite["p_placements"]] = by_team("1", "2");
  write[lobby::kSettleWrite["p_attempt_id"]] = "0";
  // The lobby takes the rooms' match ids and the time from the prepare's rows; a pgbench script
  // cannot carry rows from one statement to the next, so the write takes its own from the same
  // identity: one nextval a room more than the lobby's call makes.
  calls.write =
      "(SELECT w.* FROM (SELECT ARRAY(SELECT nextval(pg_get_serial_sequence('matches', "
      "'match_id')::regclass) FROM unnest(" +
      rooms +
      ") WITH ORDINALITY AS u(r, i) ORDER BY u.i) AS ids, "
      "(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms) m, "
      "LATERAL " +
      lobby::kSettleWrite.Call(write) + " w)";
  return calls;
}

}  // namespace verdict::bench
