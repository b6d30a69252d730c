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
      LEFT JOIN (SELECT mp.player_id, x.mode,
                        count(*) FILTER (WHERE result <> 'aborted') AS games,
                        count(*) FILTER (WHERE result = 'win') AS wins,
                        count(*) FILTER (WHERE result = 'loss') AS losses,
                        count(*) FILTER (WHERE result = 'draw') AS draws,
                        sum(rating_after - rating_before) AS delta
                 FROM match_players mp JOIN matches x USING (match_id)
                 GROUP BY mp.player_id, x.mode) m
        ON m.player_id = r.player_id AND m.mode = r.mode
      WHERE (r.games, r.wins, r.losses, r.draws, r.rating) IS DISTINCT FROM
            (coalesce(m.games, 0), coalesce(m.wins, 0), coalesce(m.losses, 0),
             coalesce(m.draws, 0), 1500 + coalesce(m.delta, 0)))",
                      "P2: counters differ from the settled matches", &report);
  // The chain: each player's matches in a mode, in match order (a player is in one transaction
  // at a time, under its row lock, so a later match has the larger id), start where the one
  // before ended, the first at 1500, and the last ends at the player's rating. Two matches of one
  // player in one transaction (a released room and the next one) must both be in it.
  EachRowIsAViolation(tx, R"(
      SELECT 'player ' || c.player_id,
             format('match %s starts at %s, the match before it ended at %s', c.match_id,
                    c.rating_before, c.before)
      FROM (SELECT mp.player_id, mp.match_id, mp.rating_before,
                   lag(mp.rating_after, 1, 1500::float8)
                     OVER (PARTITION BY mp.player_id, x.mode ORDER BY mp.match_id) AS before
            FROM match_players mp JOIN matches x USING (match_id)) c
      WHERE c.rating_before <> c.before
      UNION ALL
      SELECT 'player ' || r.player_id,
             format('the last match ends at %s, the player has %s', l.rating_after, r.rating)
      FROM (SELECT m.mode, pr.* FROM player_ratings pr JOIN modes m USING (mode_id)) r
      JOIN LATERAL (SELECT mp.rating_after FROM match_players mp JOIN matches x USING (match_id)
                    WHERE mp.player_id = r.player_id AND x.mode = r.mode
                    ORDER BY mp.match_id DESC LIMIT 1) l ON true
      WHERE l.rating_after <> r.rating)",
                      "P2: a player's rating chain is broken", &report);
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
