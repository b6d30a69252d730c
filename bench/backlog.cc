#include "bench/backlog.h"

#include <algorithm>
#include <cstdio>
#include <pqxx/pqxx>
#include <string>

namespace verdict::bench {

v1::BattleResult ResultFor(uint64_t base, uint64_t slot, const BacklogShape& shape) {
  v1::BattleResult r;
  r.set_room_id(base + slot);
  r.set_outcome(v1::SETTLED);
  if (shape.teams == 2) {
    r.set_winner_team(1);
  } else {
    for (uint32_t t = 1; t <= shape.teams; ++t) {
      v1::TeamPlacement* placement = r.add_placements();
      placement->set_team(t);
      placement->set_rank(t);
    }
  }
  r.set_ended_at_ms(1'700'000'000'000);
  r.set_node_id(kBacklogNode);
  r.set_replay_path("replays/" + std::to_string(base + slot));
  for (uint32_t g = 1; g <= shape.seats(); ++g) {
    v1::PlayerResult* p = r.add_players();
    p->set_player_id(std::to_string(slot * shape.seats() + g));
    p->set_team((g - 1) / shape.size + 1);
    p->set_kills(g);
    p->set_score(100 * g);
  }
  return r;
}

// Allocates the rooms a run settles, then brings the database to where it would be after the
// outage the backlog stands for (SettleDatabaseAsAfterOutage).
void AllocateRooms(const std::string& conninfo, uint64_t base, uint64_t count,
                   const BacklogShape& shape) {
  pqxx::connection conn(conninfo);
  constexpr uint64_t kChunk = 1000;
  for (uint64_t first = 1; first <= count; first += kChunk) {
    const uint64_t last = std::min(count, first + kChunk - 1);
    pqxx::work tx(conn);
    // The refusals, counted by status and first detail: nothing when every room was allocated.
    const auto refused = tx.exec_params1(
        "SELECT coalesce(string_agg(r.n || ' ' || r.status || coalesce(' (' || r.detail || ')', "
        "''), ', '), '') FROM (SELECT a.status, min(coalesce(a.detail, a.busy_player)) AS "
        "detail, count(*) AS n FROM "
        "generate_series($1::bigint, $2::bigint) r, LATERAL verdict_allocate(r, $3, $5, "
        "ARRAY(SELECT ((r - $4::bigint) * $6 + g)::text FROM "
        "generate_series(1, $6) g), ARRAY(SELECT ((g - 1) / $7 + 1)::smallint FROM "
        "generate_series(1, $6) g)) a WHERE a.status NOT IN ('allocated', 'duplicate') "
        "GROUP BY a.status) r",
        base + first, base + last, std::string(kBacklogNode), base, shape.mode,
        static_cast<int64_t>(shape.seats()), static_cast<int64_t>(shape.size))[0];
    tx.commit();
    if (!refused.as<std::string>().empty()) {
      // Their results will be refused (ROOM_UNKNOWN) and dead-lettered, not settled: a player
      // busy means a room of another run on this database still seats them.
      std::fprintf(stderr,
                   "    warning: rooms of mode %s not allocated: %s; their results will be "
                   "refused (a database of the run's own avoids it)\n",
                   shape.mode.c_str(), refused.c_str());
    }
  }
  SettleDatabaseAsAfterOutage(conninfo);
}

// What autovacuum would have done during the outage: the allocation's tables vacuumed and analyzed,
// the settlement's non-empty ones too, then a checkpoint (backlog.h says why each). A table
// that a build's schema lacks is passed over: --baseline-lobby drains through older schemas too.
void SettleDatabaseAsAfterOutage(const std::string& conninfo) {
  try {
    pqxx::connection conn(conninfo);
    const auto exists = [&conn](const std::string& table) {
      pqxx::nontransaction tx(conn);
      return !tx.exec_params1("SELECT to_regclass($1)", table)[0].is_null();
    };
    for (const char* table : {"players", "battle_rooms", "battle_room_seats"}) {
      if (exists(table)) pqxx::nontransaction(conn).exec("VACUUM ANALYZE " + std::string(table));
    }
    for (const char* table : {"matches", "match_players", "replays", "settlement_events",
                              "settlement_receipts", "player_ratings"}) {
      if (!exists(table)) continue;
      pqxx::nontransaction tx(conn);
      if (tx.exec1("SELECT EXISTS (SELECT 1 FROM " + std::string(table) + ")")[0].as<bool>()) {
        tx.exec("VACUUM ANALYZE " + std::string(table));
      }
    }
    pqxx::nontransaction(conn).exec("CHECKPOINT");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "    (no vacuum, analyze or checkpoint before the run: %s)\n", e.what());
  }
}

void ReleaseRooms(const std::string& conninfo, uint64_t first, uint64_t last) {
  pqxx::connection conn(conninfo);
  pqxx::nontransaction tx(conn);
  tx.exec_params(
      "SELECT count(*) FROM generate_series($1::bigint, $2::bigint) r, "
      "LATERAL verdict_release_room(r) x",
      first, last);
}

uint64_t ReceiptsBetween(const std::string& conninfo, uint64_t base, uint64_t count) {
  pqxx::connection conn(conninfo);
  pqxx::nontransaction tx(conn);
  return tx
      .exec_params1("SELECT count(*) FROM settlement_receipts WHERE room_id BETWEEN $1 AND $2",
                    base + 1, base + count)[0]
      .as<uint64_t>();
}

}  // namespace verdict::bench
