#include "lobby/void_transaction.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "lobby/pg/array_literal.h"
#include "lobby/pg/run.h"
#include "lobby/void_ratings.h"
#include "proto/wire.h"

namespace verdict::lobby {
namespace {

// A replay over its limit names how many later matches it would rate again, counted up to this
// many times the limit (without a lock: before the claim), and says "more than" beyond.
constexpr int kCountOverLimitFactor = 10;
// How many times the locks are taken again when a settlement that committed meanwhile brought
// players to the affected set; then the void answers UNAVAILABLE, to be retried.
constexpr int kLockAttempts = 4;

const char* PolicyName(VoidPolicy policy) {
  return policy == VoidPolicy::kReplay ? "replay" : "compensate";
}

// The voided match as matches and modes hold it.
constexpr char kMatchColumns[] =
    "m.room_id, m.node_id, m.outcome, m.mode, md.mode_id, md.system, md.model, "
    "md.parameters::text, md.rated";
struct MatchRow {
  uint64_t room_id = 0;
  std::string node_id, outcome, mode;
  int mode_id = 0;
  std::string system, model, parameters;
  bool rated = true;
};

// A match_players line, columns in the order of kSeatColumns.
constexpr char kSeatColumns[] =
    "match_id, player_id, team, rank, result, rating_before, rating_after, deviation_before, "
    "deviation_after, volatility_before, volatility_after";
HistorySeat SeatFromRow(const pqxx::row& row) {
  return {row[0].as<uint64_t>(),
          row[1].as<std::string>(),
          row[2].as<uint32_t>(),
          row[3].as<uint32_t>(),
          row[4].as<std::string>(),
          {row[5].as<double>(), row[7].as<double>(), row[9].as<double>()},
          {row[6].as<double>(), row[8].as<double>(), row[10].as<double>()}};
}

// A void's record, columns in the order of kVoidColumns, then its players.
constexpr char kVoidColumns[] =
    "match_id, room_id, mode, policy, reason, (extract(epoch FROM voided_at) * 1000)::bigint, "
    "matches_replayed";

}  // namespace

std::vector<std::pair<std::string, std::string>> VoidStatements() {
  return {
      {"void_match_of_room", "SELECT match_id FROM settlement_receipts WHERE room_id = $1"},
      {"void_match", std::string("SELECT ") + kMatchColumns +
                         " FROM matches m JOIN modes md ON md.mode = m.mode WHERE m.match_id = $1"},
      {"void_record",
       std::string("SELECT ") + kVoidColumns + " FROM match_voids WHERE match_id = $1"},
      {"void_record_players",
       "SELECT player_id, rating_before, rating_after, deviation_before, deviation_after, "
       "volatility_before, volatility_after FROM match_void_players WHERE match_id = $1 "
       "ORDER BY player_id"},
      {"void_affected",
       "SELECT u.match_id FROM unnest(verdict_void_affected($1, $2, $3)) WITH ORDINALITY "
       "AS u(match_id, i) ORDER BY u.i"},
      // The claim: a second void of the match waits here for the first's commit, then finds it.
      {"void_claim",
       "INSERT INTO match_voids (match_id, room_id, mode, policy, reason) "
       "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (match_id) DO NOTHING "
       "RETURNING (extract(epoch FROM voided_at) * 1000)::bigint"},
      {"void_seats", std::string("SELECT ") + kSeatColumns +
                         " FROM match_players WHERE match_id = ANY ($1::bigint[]) "
                         "ORDER BY match_id, player_id"},
      // The settlement's lock order: players by id, then their ratings by mode and player id.
      {"void_lock_players",
       "SELECT player_id FROM players WHERE player_id = ANY ($1::text[]) ORDER BY player_id "
       "FOR UPDATE"},
      {"void_lock_ratings",
       "SELECT player_id, rating, deviation, volatility FROM player_ratings "
       "WHERE mode_id = $1 AND player_id = ANY ($2::text[]) ORDER BY player_id FOR UPDATE"},
      // Each player's newest match in the mode: where a compensation sits in its chain.
      {"void_newest_matches",
       "SELECT n.pid, (SELECT mp.match_id FROM match_players mp JOIN matches x "
       "ON x.match_id = mp.match_id WHERE mp.player_id = n.pid AND x.mode = $2 "
       "ORDER BY mp.match_id DESC LIMIT 1) FROM unnest($1::text[]) AS n(pid)"},
      {"void_keep_revisions",
       "INSERT INTO match_rating_revisions (match_id, player_id, void_match_id, rating_before, "
       "rating_after, deviation_before, deviation_after, volatility_before, volatility_after) "
       "SELECT mp.match_id, mp.player_id, $3::bigint, mp.rating_before, mp.rating_after, "
       "mp.deviation_before, mp.deviation_after, mp.volatility_before, mp.volatility_after "
       "FROM unnest($1::bigint[], $2::text[]) AS x(match_id, pid) "
       "JOIN match_players mp ON mp.match_id = x.match_id AND mp.player_id = x.pid"},
      {"void_revise_seats",
       "UPDATE match_players mp SET rating_before = x.rb, rating_after = x.ra, "
       "deviation_before = x.db, deviation_after = x.da, volatility_before = x.vb, "
       "volatility_after = x.va "
       "FROM unnest($1::bigint[], $2::text[], $3::float8[], $4::float8[], $5::float8[], "
       "$6::float8[], $7::float8[], $8::float8[]) AS x(match_id, pid, rb, ra, db, da, vb, va) "
       "WHERE mp.match_id = x.match_id AND mp.player_id = x.pid"},
      {"void_write_ratings",
       "UPDATE player_ratings r SET rating = x.rating, deviation = x.deviation, "
       "volatility = x.volatility, displayed = x.displayed, games = r.games - x.games, "
       "wins = r.wins - x.wins, losses = r.losses - x.losses, draws = r.draws - x.draws, "
       "placements = r.placements - x.placements, "
       // The games taken off count toward the mode's provisional games again: the rule
       // verdict_declare_mode applies to every row, N less the games, at least 0.
       "provisional_left = greatest(m.provisional_games - (r.games - x.games), 0), "
       "provisional = m.provisional_games > r.games - x.games "
       "FROM modes m, unnest($2::text[], $3::float8[], $4::float8[], $5::float8[], $6::float8[], "
       "$7::integer[], $8::integer[], $9::integer[], $10::integer[], $11::bigint[]) "
       "AS x(pid, rating, deviation, volatility, displayed, games, wins, losses, draws, "
       "placements) WHERE m.mode_id = $1 AND r.mode_id = $1 AND r.player_id = x.pid"},
      {"void_write_players",
       "INSERT INTO match_void_players (match_id, player_id, after_match_id, rating_before, "
       "rating_after, deviation_before, deviation_after, volatility_before, volatility_after) "
       "SELECT $1::bigint, x.* FROM unnest($2::text[], $3::bigint[], $4::float8[], $5::float8[], "
       "$6::float8[], $7::float8[], $8::float8[], $9::float8[]) AS x"},
      {"void_finish", "UPDATE match_voids SET matches_replayed = $2 WHERE match_id = $1"},
      {"void_event",
       "INSERT INTO settlement_events (room_id, node_id, match_id, payload) "
       "VALUES ($1, $2, $3, $4::json)"},
  };
}

namespace {

std::optional<MatchRow> ReadMatch(pqxx::transaction_base& tx, uint64_t match_id) {
  const pqxx::result rows = tx.exec_prepared("void_match", match_id);
  if (rows.empty()) return std::nullopt;
  const pqxx::row& r = rows[0];
  return MatchRow{r[0].as<uint64_t>(),    r[1].as<std::string>(), r[2].as<std::string>(),
                  r[3].as<std::string>(), r[4].as<int>(),         r[5].as<std::string>(),
                  r[6].as<std::string>(), r[7].as<std::string>(), r[8].as<bool>()};
}

// The void of `match_id` as its transaction recorded it, if it was voided.
std::optional<v1::MatchVoid> ReadVoid(pqxx::transaction_base& tx, uint64_t match_id) {
  const pqxx::result rows = tx.exec_prepared("void_record", match_id);
  if (rows.empty()) return std::nullopt;
  const pqxx::row& r = rows[0];
  v1::MatchVoid v;
  v.set_match_id(r[0].as<uint64_t>());
  v.set_room_id(r[1].as<uint64_t>());
  v.set_mode(r[2].as<std::string>());
  v.set_policy(r[3].as<std::string>());
  v.set_reason(r[4].as<std::string>());
  v.set_voided_at_ms(r[5].as<int64_t>());
  v.set_matches_replayed(r[6].as<uint32_t>());
  for (const auto& p : tx.exec_prepared("void_record_players", match_id)) {
    v1::MatchVoid::PlayerChange* change = v.add_players();
    change->set_player_id(p[0].as<std::string>());
    change->set_rating_before(p[1].as<double>());
    change->set_rating_after(p[2].as<double>());
    change->set_deviation_before(p[3].as<double>());
    change->set_deviation_after(p[4].as<double>());
    change->set_volatility_before(p[5].as<double>());
    change->set_volatility_after(p[6].as<double>());
  }
  return v;
}

std::vector<uint64_t> Affected(pqxx::transaction_base& tx, uint64_t match_id,
                               const std::string& mode, int cap) {
  std::vector<uint64_t> matches;
  for (const auto& row : tx.exec_prepared("void_affected", match_id, mode, cap)) {
    matches.push_back(row[0].as<uint64_t>());
  }
  return matches;
}

std::string BigintArray(const std::vector<uint64_t>& values) {
  pg::ArrayLiteral array;
  for (uint64_t v : values) array.Add(v);
  return std::move(array).str();
}

std::string TextArray(const std::set<std::string>& values) {
  pg::ArrayLiteral array;
  for (const std::string& v : values) array.AddText(v);
  return std::move(array).str();
}

std::vector<HistorySeat> ReadSeats(pqxx::transaction_base& tx, const std::vector<uint64_t>& ids) {
  std::vector<HistorySeat> seats;
  for (const auto& row : tx.exec_prepared("void_seats", BigintArray(ids))) {
    seats.push_back(SeatFromRow(row));
  }
  return seats;
}

// The players' and their ratings' locks, in the settlement's order; the ratings, read under them.
std::map<std::string, rating::Rating> LockPlayers(pqxx::transaction_base& tx, int mode_id,
                                                  const std::set<std::string>& players) {
  const std::string ids = TextArray(players);
  tx.exec_prepared("void_lock_players", ids);
  std::map<std::string, rating::Rating> ratings;
  for (const auto& row : tx.exec_prepared("void_lock_ratings", mode_id, ids)) {
    ratings[row[0].as<std::string>()] = {row[1].as<double>(), row[2].as<double>(),
                                         row[3].as<double>()};
  }
  return ratings;
}

// What the locks read: the affected history and every affected player's rating.
struct Locked {
  std::vector<HistorySeat> voided, later;
  std::map<std::string, rating::Rating> current;
};

// Locks the players of the voided match and of the later matches of its affected set (replay),
// reading that set again under the locks: a settlement that committed since the first walk may
// have added to it. If it brought a player not locked yet, the locks are given back (to a
// savepoint) and all taken again in order. kTooLarge if the set grew over the limit.
Result<std::variant<Locked, VoidOutcome>> LockAffected(pqxx::work& tx, uint64_t match_id,
                                                       const MatchRow& match,
                                                       const VoidRequest& request,
                                                       std::set<std::string> players) {
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    pqxx::subtransaction locks(tx, "void_locks");
    Locked out;
    out.current = LockPlayers(locks, match.mode_id, players);
    std::vector<uint64_t> later;
    if (request.policy == VoidPolicy::kReplay) {
      later = Affected(locks, match_id, match.mode, request.replay_limit);
      if (later.size() > static_cast<size_t>(request.replay_limit)) {
        return std::variant<Locked, VoidOutcome>(VoidOutcome{
            VoidStatus::kTooLarge, {}, static_cast<uint64_t>(request.replay_limit), true});
      }
    }
    later.push_back(match_id);
    bool all_locked = true;
    for (HistorySeat& seat : ReadSeats(locks, later)) {
      all_locked = players.insert(seat.player_id).second == false && all_locked;
      (seat.match_id == match_id ? out.voided : out.later).push_back(std::move(seat));
    }
    if (all_locked) {
      locks.commit();
      return std::variant<Locked, VoidOutcome>(std::move(out));
    }
  }
  return UnavailableError("the matches a replay of match " + std::to_string(match_id) +
                          " would rate again kept growing while it ran; retry it");
}

// Writes what `plan` says, and the void's record and event; the answer it makes.
v1::MatchVoid Write(pqxx::work& tx, uint64_t match_id, const MatchRow& match,
                    const VoidRequest& request, int64_t voided_at_ms, const VoidPlan& plan,
                    size_t replayed) {
  if (!plan.revised.empty()) {
    pg::ArrayLiteral ids, pids, rb, ra, db, da, vb, va;
    for (const RevisedSeat& s : plan.revised) {
      ids.Add(s.match_id);
      pids.AddText(s.player_id);
      rb.Add(s.before.value);
      ra.Add(s.after.value);
      db.Add(s.before.deviation);
      da.Add(s.after.deviation);
      vb.Add(s.before.volatility);
      va.Add(s.after.volatility);
    }
    tx.exec_prepared("void_keep_revisions", ids.str(), pids.str(), match_id);
    tx.exec_prepared("void_revise_seats", ids.str(), pids.str(), rb.str(), ra.str(), db.str(),
                     da.str(), vb.str(), va.str());
  }
  std::set<std::string> moved;
  for (const VoidedPlayer& p : plan.players) moved.insert(p.player_id);
  std::map<std::string, uint64_t> newest;
  for (const auto& row : tx.exec_prepared("void_newest_matches", TextArray(moved), match.mode)) {
    newest[row[0].as<std::string>()] = row[1].is_null() ? match_id : row[1].as<uint64_t>();
  }
  pg::ArrayLiteral pids, after_matches, rating, deviation, volatility, displayed, games, wins,
      losses, draws, placements, rb, db, vb;
  v1::MatchVoid answer;
  answer.set_match_id(match_id);
  answer.set_room_id(match.room_id);
  answer.set_mode(match.mode);
  answer.set_policy(PolicyName(request.policy));
  answer.set_reason(request.reason);
  answer.set_voided_at_ms(voided_at_ms);
  answer.set_matches_replayed(static_cast<uint32_t>(replayed));
  for (const VoidedPlayer& p : plan.players) {
    pids.AddText(p.player_id);
    after_matches.Add(newest[p.player_id]);
    rating.Add(p.after.value);
    deviation.Add(p.after.deviation);
    volatility.Add(p.after.volatility);
    displayed.Add(p.displayed);
    games.Add(p.games);
    wins.Add(p.wins);
    losses.Add(p.losses);
    draws.Add(p.draws);
    placements.Add(p.placements);
    rb.Add(p.before.value);
    db.Add(p.before.deviation);
    vb.Add(p.before.volatility);
    v1::MatchVoid::PlayerChange* change = answer.add_players();
    change->set_player_id(p.player_id);
    change->set_rating_before(p.before.value);
    change->set_rating_after(p.after.value);
    change->set_deviation_before(p.before.deviation);
    change->set_deviation_after(p.after.deviation);
    change->set_volatility_before(p.before.volatility);
    change->set_volatility_after(p.after.volatility);
  }
  tx.exec_prepared("void_write_ratings", match.mode_id, pids.str(), rating.str(), deviation.str(),
                   volatility.str(), displayed.str(), games.str(), wins.str(), losses.str(),
                   draws.str(), placements.str());
  tx.exec_prepared("void_write_players", match_id, pids.str(), after_matches.str(), rb.str(),
                   rating.str(), db.str(), deviation.str(), vb.str(), volatility.str());
  tx.exec_prepared("void_finish", match_id, static_cast<int>(replayed));
  return answer;
}

// The battle.voided event: the void's answer with its type, without being a duplicate.
Result<std::string> EventJson(const v1::MatchVoid& answer) {
  auto json = wire::ToJson(answer);
  if (!json.ok()) return json.status();
  return "{\"type\": \"battle.voided\", " + json->substr(1);
}

// The void, once the match is known and not voided yet: its claim, locks, rating step and writes.
Result<VoidOutcome> VoidKnown(pqxx::work& tx, uint64_t match_id, const MatchRow& match,
                              const VoidRequest& request, const rating::RatingSystem& system) {
  std::set<std::string> players;
  if (request.policy == VoidPolicy::kReplay) {
    // The first walk, without a lock: a replay over the limit is refused before anything is
    // locked or written, naming its size.
    std::vector<uint64_t> later = Affected(tx, match_id, match.mode, request.replay_limit);
    if (later.size() > static_cast<size_t>(request.replay_limit)) {
      const int cap = request.replay_limit * kCountOverLimitFactor;
      const size_t counted = Affected(tx, match_id, match.mode, cap).size();
      return VoidOutcome{VoidStatus::kTooLarge,
                         {},
                         std::min<uint64_t>(counted, cap),
                         counted > static_cast<size_t>(cap)};
    }
    for (const HistorySeat& s : ReadSeats(tx, later)) players.insert(s.player_id);
  }
  for (const HistorySeat& s : ReadSeats(tx, {match_id})) players.insert(s.player_id);

  const pqxx::result claimed = tx.exec_prepared("void_claim", match_id, match.room_id, match.mode,
                                                PolicyName(request.policy), request.reason);
  if (claimed.empty()) {
    // Another void of the match committed after this one looked: its outcome is the answer.
    auto first = ReadVoid(tx, match_id);
    if (!first)
      return InternalError("match " + std::to_string(match_id) +
                           " has a void claim "
                           "that cannot be read");
    first->set_duplicate(true);
    return VoidOutcome{VoidStatus::kDuplicate, std::move(*first), 0};
  }
  const int64_t voided_at_ms = claimed[0][0].as<int64_t>();

  auto locked = LockAffected(tx, match_id, match, request, std::move(players));
  if (!locked.ok()) return locked.status();
  if (auto* refused = std::get_if<VoidOutcome>(&*locked)) return std::move(*refused);
  const Locked& history = std::get<Locked>(*locked);
  auto plan =
      PlanVoid(request.policy, system, match.rated, history.voided, history.later, history.current);
  if (!plan.ok())
    return InternalError("match " + std::to_string(match_id) + ": " + plan.status().message());
  std::set<uint64_t> replayed;
  for (const HistorySeat& s : history.later) replayed.insert(s.match_id);
  v1::MatchVoid answer = Write(tx, match_id, match, request, voided_at_ms, *plan, replayed.size());
  auto event = EventJson(answer);
  if (!event.ok()) return event.status();
  tx.exec_prepared("void_event", match.room_id, match.node_id, match_id, *event);
  return VoidOutcome{VoidStatus::kVoided, std::move(answer), 0};
}

}  // namespace

Result<VoidOutcome> VoidTransaction::Void(const VoidRequest& request) {
  return pg::Run<VoidOutcome>(pool_, "void", [&](pg::Pool::Lease& lease) -> Result<VoidOutcome> {
    pqxx::work tx(lease.conn());
    uint64_t match_id = request.match_id;
    if (match_id == 0) {
      const pqxx::result found = tx.exec_prepared("void_match_of_room", request.room_id);
      if (found.empty()) return VoidOutcome{VoidStatus::kMatchUnknown, {}, 0};
      match_id = found[0][0].as<uint64_t>();
    }
    const std::optional<MatchRow> match = ReadMatch(tx, match_id);
    if (!match) return VoidOutcome{VoidStatus::kMatchUnknown, {}, 0};
    if (auto first = ReadVoid(tx, match_id)) {
      first->set_duplicate(true);
      return VoidOutcome{VoidStatus::kDuplicate, std::move(*first), 0};
    }
    if (match->outcome == "ABORTED") return VoidOutcome{VoidStatus::kNotVoidable, {}, 0};
    auto system = systems_.Of(match->system, match->model, match->parameters);
    if (!system.ok()) return system.status();
    auto outcome = VoidKnown(tx, match_id, *match, request, **system);
    if (outcome.ok() && outcome->status == VoidStatus::kVoided) {
      tx.commit();
      spdlog::warn("match={} room={} mode={}: voided ({}, {} later matches rated again): {}",
                   match_id, match->room_id, match->mode, PolicyName(request.policy),
                   outcome->voided.matches_replayed(), request.reason);
    }
    return outcome;
  });
}

}  // namespace verdict::lobby
