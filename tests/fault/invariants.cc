#include "tests/fault/invariants.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <pqxx/pqxx>

namespace verdict::testing {
namespace {

// Runs `sql` and adds one violation per row, formatted from its first two columns.
void EachRowIsAViolation(pqxx::transaction_base& tx, const std::string& sql,
                         const std::string& label, InvariantReport* report) {
  for (const auto& row : tx.exec(sql)) {
    std::string detail = label + ": " + row[0].c_str();
    if (row.size() > 1) detail += " (" + std::string(row[1].c_str()) + ")";
    report->violations.push_back(detail);
  }
}

}  // namespace

std::string InvariantReport::Summary() const {
  return std::to_string(allocated) + " rooms allocated, " + std::to_string(settled) + " settled, " +
         std::to_string(stored) + " reported stored by the node, " + std::to_string(unfinished) +
         " unfinished (node killed mid-battle), " + std::to_string(dead_lettered) +
         " dead-lettered, " + std::to_string(quarantined) + " quarantined (" +
         std::to_string(undecodable) + " undecodable), " + std::to_string(violations.size()) +
         " violations";
}

bool ParseListing(const std::string& json, v1::OutboxListing* listing) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  return google::protobuf::util::JsonStringToMessage(json, listing, options).ok();
}

std::set<uint64_t> ReadStoredLog(const std::string& path) {
  std::set<uint64_t> rooms;
  std::ifstream in(path);
  uint64_t room = 0;
  while (in >> room) rooms.insert(room);
  return rooms;
}

namespace {

// One snapshot of the database for every query of a check: the lobby may still be running (its
// maintenance, a retention pass), and the checks compare tables with each other.
using Snapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;

InvariantReport CheckOnce(pqxx::connection& conn, const v1::OutboxListing& listing,
                          const std::set<uint64_t>& stored_rooms, uint64_t injected_undecodable) {
  InvariantReport report;
  report.stored = stored_rooms.size();
  Snapshot tx(conn);

  // A settled room has its receipt, or, once retention expired the receipt, its compact record.
  std::set<uint64_t> receipts, active;
  for (const auto& row : tx.exec("SELECT room_id FROM settlement_receipts UNION ALL "
                                 "SELECT room_id FROM settled_rooms")) {
    if (!receipts.insert(row[0].as<uint64_t>()).second) {
      report.violations.push_back("P2: room " + row[0].as<std::string>() +
                                  " has both a receipt and a compact record");
    }
  }
  for (const auto& row : tx.exec("SELECT room_id FROM battle_rooms")) {
    active.insert(row[0].as<uint64_t>());
  }
  report.settled = receipts.size();
  report.allocated = receipts.size() + active.size();

  // P4 and the drain: what the outbox still holds.
  std::map<uint64_t, std::string> set_aside;  // room -> where
  for (const auto& r : listing.records()) {
    const std::string id = std::to_string(r.room_id());
    if (r.where().rfind("shard-", 0) == 0) {
      report.violations.push_back("drain: room " + id + " is still pending in " + r.where());
      continue;
    }
    if (r.where() == "quarantine") ++report.quarantined;
    if (r.where() == "dead-letter") ++report.dead_lettered;
    if (r.reason().empty()) {
      report.violations.push_back("P4: room " + id + " is in " + r.where() + " with no reason");
    }
    if (r.reason() == "undecodable") {
      ++report.undecodable;
    } else {
      set_aside[r.room_id()] = r.where();
    }
  }
  if (report.undecodable != injected_undecodable) {
    report.violations.push_back("P4: " + std::to_string(report.undecodable) +
                                " undecodable records quarantined, but " +
                                std::to_string(injected_undecodable) + " were written");
  }

  // P1: everything reported stored is settled exactly once or explained.
  for (uint64_t room : stored_rooms) {
    if (!receipts.count(room) && !set_aside.count(room)) {
      report.violations.push_back("P1: room " + std::to_string(room) +
                                  " was reported stored, has no receipt and is in no outbox area");
    }
  }
  // Exactly one answer per room: a settled room's redelivery is a duplicate, never refused.
  for (const auto& r : listing.records()) {
    if (r.where() == "dead-letter" && receipts.count(r.room_id())) {
      report.violations.push_back("P2: room " + std::to_string(r.room_id()) +
                                  " was settled, yet its redelivery was refused (" + r.reason() +
                                  ") and dead-lettered");
    }
  }
  for (uint64_t room : active) {
    if (!stored_rooms.count(room) && !set_aside.count(room)) ++report.unfinished;
  }

  // P2: counters and ratings are the sums of the settled matches, per player and mode; the suite
  // plays the "default" mode (Elo from 1500), zero-sum per match.
  EachRowIsAViolation(tx, R"(
      SELECT 'player ' || r.player_id || ' in ' || r.mode,
             format('games %s wins %s losses %s draws %s rating %s; matches say %s %s %s %s %s',
                    r.games, r.wins, r.losses, r.draws, r.rating,
                    coalesce(m.games, 0), coalesce(m.wins, 0), coalesce(m.losses, 0),
                    coalesce(m.draws, 0), 1500 + coalesce(m.delta, 0))
      FROM (SELECT m.mode, pr.* FROM player_ratings pr JOIN modes m USING (mode_id)) r
      LEFT JOIN (SELECT u.player_id, u.mode, sum(u.game) AS games, sum(u.win) AS wins,
                        sum(u.loss) AS losses, sum(u.draw) AS draws, sum(u.delta) AS delta
                 FROM (SELECT mp.player_id, x.mode,
                              (result <> 'aborted' AND v.match_id IS NULL)::int AS game,
                              (result = 'win' AND v.match_id IS NULL)::int AS win,
                              (result = 'loss' AND v.match_id IS NULL)::int AS loss,
                              (result = 'draw' AND v.match_id IS NULL)::int AS draw,
                              CASE WHEN v.policy = 'replay' THEN 0
                                   ELSE rating_after - rating_before END AS delta
                       FROM match_players mp JOIN matches x USING (match_id)
                       LEFT JOIN match_voids v USING (match_id)
                       UNION ALL
                       SELECT vp.player_id, v.mode, 0, 0, 0, 0, vp.rating_after - vp.rating_before
                       FROM match_void_players vp JOIN match_voids v USING (match_id)
                       WHERE v.policy = 'compensate') u
                 GROUP BY u.player_id, u.mode) m
        ON m.player_id = r.player_id AND m.mode = r.mode
      WHERE (r.games, r.wins, r.losses, r.draws, r.rating) IS DISTINCT FROM
            (coalesce(m.games, 0), coalesce(m.wins, 0), coalesce(m.losses, 0),
             coalesce(m.draws, 0), 1500 + coalesce(m.delta, 0)))",
                      "P2: counters differ from the settled matches", &report);
  for (std::string& broken : RatingChainViolations(tx)) {
    report.violations.push_back("P2: a player's rating chain is broken: " + std::move(broken));
  }
  EachRowIsAViolation(tx, R"(
      SELECT 'match ' || match_id, 'Elo changes sum to ' || sum(rating_after - rating_before)
      FROM match_players GROUP BY match_id HAVING sum(rating_after - rating_before) <> 0)",
                      "P2: Elo is not zero-sum", &report);
  // The history is kept (only events and receipts expire under the suite's retention), so every
  // settled room has exactly one match, and every match belongs to a settled room. Since the
  // history is partitioned the database no longer keeps matches.room_id unique: only these
  // checks would see a second match of a room.
  EachRowIsAViolation(tx, R"(
      SELECT 'room ' || r.room_id, count(m.match_id) || ' matches'
      FROM (SELECT room_id FROM settlement_receipts UNION ALL SELECT room_id FROM settled_rooms) r
      LEFT JOIN matches m ON m.room_id = r.room_id
      GROUP BY r.room_id HAVING count(m.match_id) <> 1)",
                      "P2: a settled room without exactly one match", &report);
  EachRowIsAViolation(tx, R"(
      SELECT 'match ' || m.match_id, 'room ' || m.room_id || ' has no receipt'
      FROM matches m
      WHERE NOT EXISTS (SELECT 1 FROM settlement_receipts r WHERE r.room_id = m.room_id)
        AND NOT EXISTS (SELECT 1 FROM settled_rooms s WHERE s.room_id = m.room_id))",
                      "P2: a match without a settlement", &report);
  EachRowIsAViolation(tx, R"(
      SELECT 'players', 'Elo sums to ' || sum(rating) || ' for ' || count(*) || ' players'
      FROM player_ratings JOIN modes USING (mode_id)
      WHERE mode = 'default' HAVING sum(rating) <> 1500 * count(*))",
                      "P2: Elo is not zero-sum over all players", &report);

  // P5: nothing released early, nothing left behind.
  // A player is held by the rooms not released that seat them (verdict_player_room): never by
  // two. The suite releases no room, so a room released is one whose players went free before
  // its settlement committed.
  EachRowIsAViolation(tx, R"(
      SELECT 'player ' || s.player_id, count(*) || ' rooms not released seat them'
      FROM battle_room_seats s JOIN battle_rooms b USING (room_id)
      WHERE b.released_at IS NULL GROUP BY s.player_id HAVING count(*) > 1)",
                      "P5: a player held by two rooms", &report);
  EachRowIsAViolation(tx, R"(
      SELECT 'room ' || b.room_id, 'its players were released before it settled'
      FROM battle_rooms b WHERE b.released_at IS NOT NULL)",
                      "P5: an active room's players were released", &report);
  EachRowIsAViolation(tx, R"(
      SELECT 'room ' || b.room_id, 'settled but still active'
      FROM battle_rooms b
      WHERE EXISTS (SELECT 1 FROM settlement_receipts r WHERE r.room_id = b.room_id)
         OR EXISTS (SELECT 1 FROM settled_rooms s WHERE s.room_id = b.room_id))",
                      "P5: a settled room is still active", &report);
  return report;
}

}  // namespace

std::vector<std::string> RatingChainViolations(pqxx::transaction_base& tx) {
  std::vector<std::string> violations;
  const pqxx::result rows = tx.exec(R"(
      WITH links AS (
        SELECT mp.player_id, x.mode, mp.match_id AS at, 0 AS kind, 0::float8 AS seq,
               'match ' || mp.match_id AS what, mp.rating_before, mp.rating_after,
               mp.deviation_before, mp.deviation_after, mp.volatility_before, mp.volatility_after
        FROM match_players mp JOIN matches x USING (match_id)
        WHERE NOT EXISTS (SELECT 1 FROM match_voids v
                          WHERE v.match_id = mp.match_id AND v.policy = 'replay')
        UNION ALL
        SELECT vp.player_id, v.mode, vp.after_match_id, 1, extract(epoch FROM v.voided_at),
               'the compensation of match ' || v.match_id, vp.rating_before, vp.rating_after,
               vp.deviation_before, vp.deviation_after, vp.volatility_before, vp.volatility_after
        FROM match_void_players vp JOIN match_voids v USING (match_id)
        WHERE v.policy = 'compensate'),
      chained AS (
        SELECT l.*, row_number() OVER w AS n, lag(l.rating_after) OVER w AS prev_rating,
               lag(l.deviation_after) OVER w AS prev_deviation,
               lag(l.volatility_after) OVER w AS prev_volatility
        FROM links l WINDOW w AS (PARTITION BY l.player_id, l.mode ORDER BY l.at, l.kind, l.seq))
      SELECT 'player ' || c.player_id || ' in ' || c.mode,
             format('%s starts at %s/%s/%s, the link before it ended at %s/%s/%s', c.what,
                    c.rating_before, c.deviation_before, c.volatility_before,
                    coalesce(c.prev_rating, 1500), c.prev_deviation, c.prev_volatility)
      FROM chained c
      WHERE (c.n > 1 AND (c.rating_before, c.deviation_before, c.volatility_before)
                         IS DISTINCT FROM (c.prev_rating, c.prev_deviation, c.prev_volatility))
         OR (c.n = 1 AND c.mode = 'default' AND c.rating_before <> 1500)
      UNION ALL
      SELECT 'player ' || r.player_id || ' in ' || r.mode,
             format('the last link, %s, ends at %s/%s/%s, the player has %s/%s/%s', l.what,
                    l.rating_after, l.deviation_after, l.volatility_after, r.rating, r.deviation,
                    r.volatility)
      FROM (SELECT m.mode, pr.* FROM player_ratings pr JOIN modes m USING (mode_id)) r
      JOIN LATERAL (SELECT * FROM links l WHERE l.player_id = r.player_id AND l.mode = r.mode
                    ORDER BY l.at DESC, l.kind DESC, l.seq DESC LIMIT 1) l ON true
      WHERE (l.rating_after, l.deviation_after, l.volatility_after)
            IS DISTINCT FROM (r.rating, r.deviation, r.volatility))");
  for (const auto& row : rows) {
    violations.push_back(std::string(row[0].c_str()) + " (" + row[1].c_str() + ")");
  }
  return violations;
}

InvariantReport CheckInvariants(const std::string& conninfo, const v1::OutboxListing& listing,
                                const std::set<uint64_t>& stored_rooms,
                                uint64_t injected_undecodable) {
  pqxx::connection conn(conninfo);
  // The check's reads may lose a deadlock or a serialization conflict to the lobby's own
  // transactions; they change nothing, so they read again, from a new snapshot. A violation is
  // in the data and is found again; only a conflict that keeps recurring ends the check.
  constexpr int kAttempts = 20;
  for (int attempt = 1;; ++attempt) {
    try {
      return CheckOnce(conn, listing, stored_rooms, injected_undecodable);
    } catch (const pqxx::sql_error& e) {
      const bool transient = e.sqlstate() == "40P01" || e.sqlstate() == "40001";
      if (!transient || attempt == kAttempts) throw;
      std::fprintf(stderr, "invariant check: reading again after SQLSTATE %s: %s\n",
                   e.sqlstate().c_str(), e.what());
    }
  }
}

}  // namespace verdict::testing
