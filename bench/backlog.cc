#include "bench/backlog.h"

#include <algorithm>
#include <cstdio>
#include <pqxx/pqxx>

namespace verdict::bench {

v1::BattleResult ResultFor(uint64_t base, uint64_t slot) {
  v1::BattleResult r;
  r.set_room_id(base + slot);
  r.set_outcome(v1::SETTLED);
  r.set_winner_team(1);
  r.set_ended_at_ms(1'700'000'000'000);
  r.set_node_id(kBacklogNode);
  r.set_replay_path("replays/" + std::to_string(base + slot));
  for (uint32_t g = 1; g <= 10; ++g) {
    v1::PlayerResult* p = r.add_players();
    p->set_player_id(std::to_string(slot * 10 + g));
    p->set_team(g <= 5 ? 1 : 2);
    p->set_kills(g);
    p->set_score(100 * g);
  }
  return r;
}

// Allocates the rooms a run settles, then brings the database to where it would be after the
// outage the backlog stands for:
//   - vacuums and analyzes the tables the allocation wrote, as autovacuum would have (otherwise
//     the run pays for autovacuum starting under it, on statistics from before the rooms existed);
//   - analyzes the settlement's tables that the runs before it wrote, so that each design is
//     planned on the database as it is (on none, or on statistics from a smaller table, the old
//     single-room settlement scans all of players for each room). Empty ones are left alone:
//     PostgreSQL plans a table never analyzed as at least ten pages, one analyzed empty as the
//     page it has, and foreign-key checks cached at the start of a run then scan it throughout;
//   - checkpoints, so that the run does not pay for the writes of the runs before it (a
//     checkpoint under load slows every commit's fsync).
void AllocateRooms(const std::string& conninfo, uint64_t base, uint64_t count) {
  pqxx::connection conn(conninfo);
  constexpr uint64_t kChunk = 1000;
  for (uint64_t first = 1; first <= count; first += kChunk) {
    const uint64_t last = std::min(count, first + kChunk - 1);
    pqxx::work tx(conn);
    tx.exec_params(
        "SELECT count(*) FROM generate_series($1::bigint, $2::bigint) r, LATERAL "
        "verdict_allocate(r, $3, 'default', ARRAY(SELECT ((r - $4::bigint) * 10 + g)::text FROM "
        "generate_series(1, 10) g), '{1,1,1,1,1,2,2,2,2,2}')",
        base + first, base + last, std::string(kBacklogNode), base);
    tx.commit();
  }
  try {
    pqxx::nontransaction(conn).exec("VACUUM ANALYZE players, battle_rooms, battle_room_seats");
    for (const char* table :
         {"matches", "match_players", "replays", "settlement_events", "settlement_receipts"}) {
      pqxx::nontransaction tx(conn);
      if (tx.exec1("SELECT EXISTS (SELECT 1 FROM " + std::string(table) + ")")[0].as<bool>()) {
        tx.exec("ANALYZE " + std::string(table));
      }
    }
    pqxx::nontransaction(conn).exec("CHECKPOINT");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "    (no vacuum, analyze or checkpoint before the run: %s)\n", e.what());
  }
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
