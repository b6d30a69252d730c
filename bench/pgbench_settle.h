// pgbench running a settlement itself: the ceilings `verdict-bench drain` measures the drain
// against, and the calls of the lobby's settlement statements that pgbench and the retention bench
// make of the bench's rooms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace verdict::bench {

// Which settlement pgbench runs: the lobby's own transaction, or the single-room function the
// lobby ran before batched settlement (bench/reference_settle.sql), the old design's ceiling.
enum class PgbenchStatement { kBatch, kReference };

// pgbench running a settlement itself: the lobby's transaction of `batch` rooms per call (or the
// reference function, one room per call), one call per transaction, `clients` at once, the rooms
// of call k from a sequence (base + k * batch + 1 …), each seating the players ResultFor gives it;
// its script in `dir`. Rooms settled per second; 0 if pgbench failed (said on stderr).
double RunPgbench(const std::string& conninfo, const std::string& dir, uint64_t base, uint64_t n,
                  uint32_t clients, size_t batch, PgbenchStatement statement);

// The calls of the lobby's own settlement statements (lobby/settle_calls.h) that pgbench and the
// retention bench make of the bench's rooms, in one transaction, prepare then write: `rooms`, an
// SQL array of the rooms' ids, `count` of them, all of node "bench-node", SETTLED with team 1
// winning; their players from `p`, a row of arrays rooms, ids, teams, kills, zeros, scores and
// disconnected (one element per player), five a team. The write rates them as the lobby does two
// equal teams of players new to the ladder (1500, moving 16).
struct BenchSettle {
  std::string prepare;  // a call returning verdict_settle_prepare's rows
  std::string write;    // a subquery returning verdict_settle_write's one row
};
BenchSettle BenchSettleCalls(const std::string& rooms, const std::string& count);

// The two statements of one call of the lobby's settlement transaction as pgbench makes it, whole:
// for the rooms of call `call` (an SQL expression: a pgbench variable such as ":k", or a number),
// base + call * batch + 1 … + batch, each seating the players ResultFor gives it. Run in one
// transaction, prepare then write, each returns one row (a count); the rooms must be allocated.
BenchSettle BenchSettleStatements(uint64_t base, size_t batch, const std::string& call);

}  // namespace verdict::bench
