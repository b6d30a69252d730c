#include "lobby/pg_ladder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "lobby/ladder_cursor.h"
#include "lobby/modes.h"
#include "lobby/pg/array_literal.h"
#include "lobby/pg/run.h"
#include "lobby/pg_statuses.h"
#include "lobby/rating/rating_system.h"

namespace verdict::lobby {
namespace {

// A mode row's columns, in the order every statement below returns them.
constexpr char kModeColumns[] =
    "m.mode, m.system, m.model, m.parameters::text, m.rated, m.min_teams, m.max_teams, "
    "m.min_team_size, m.max_team_size, m.in_use, (extract(epoch FROM m.declared_at) * "
    "1000)::bigint, m.provisional_games, m.closed, "
    "(SELECT s.mode FROM modes s WHERE s.mode_id = m.seed_mode_id), m.seed_keep, "
    "m.seed_deviation, m.seed_mean";

// A player_ratings row's columns after its mode and player: every statement below that reads one.
constexpr char kRatingColumns[] =
    "r.rating, r.deviation, r.volatility, r.displayed, r.games, r.wins, r.losses, r.draws, "
    "r.placements, coalesce((extract(epoch FROM r.last_match_at) * 1000)::bigint, 0), "
    "r.provisional";

// The Mode of a row of kModeColumns starting at column `at`.
v1::Mode ModeFromRow(const pqxx::row& row, int at) {
  v1::Mode m;
  m.set_mode(row[at].as<std::string>());
  // Parameters that are not a JSON object of numbers (never stored: verdict_declare_mode stores
  // StoredParameters) are shown as none; settling a room of the mode refuses them.
  auto parameters = ParametersFromStored(row[at + 3].as<std::string>());
  *m.mutable_rating() =
      DeclarationOf({row[at + 1].as<std::string>(), row[at + 2].as<std::string>(),
                     parameters.ok() ? std::move(*parameters) : std::map<std::string, double>()});
  m.set_rated(row[at + 4].as<bool>());
  m.mutable_shape()->set_min_teams(row[at + 5].as<uint32_t>());
  m.mutable_shape()->set_max_teams(row[at + 6].as<uint32_t>());
  m.mutable_shape()->set_min_team_size(row[at + 7].as<uint32_t>());
  m.mutable_shape()->set_max_team_size(row[at + 8].as<uint32_t>());
  m.set_in_use(row[at + 9].as<bool>());
  m.set_declared_at_ms(row[at + 10].as<int64_t>());
  m.set_provisional_games(row[at + 11].as<uint32_t>());
  m.set_closed(row[at + 12].as<bool>());
  if (!row[at + 13].is_null()) {
    v1::SeedFrom* seed = m.mutable_seed_from();
    seed->set_mode(row[at + 13].as<std::string>());
    seed->mutable_soft_reset()->set_keep(row[at + 14].as<double>());
    seed->mutable_soft_reset()->set_deviation(row[at + 15].as<double>());
    seed->mutable_soft_reset()->set_mean(row[at + 16].as<double>());
  }
  return m;
}

// The ModeRating of a row of kRatingColumns starting at column `at`.
v1::ModeRating RatingFromRow(const pqxx::row& row, int at, const std::string& mode,
                             const std::string& system) {
  v1::ModeRating r;
  r.set_mode(mode);
  r.set_system(system);
  r.set_rating(row[at].as<double>());
  r.set_deviation(row[at + 1].as<double>());
  r.set_volatility(row[at + 2].as<double>());
  r.set_displayed(row[at + 3].as<double>());
  r.set_games(row[at + 4].as<uint32_t>());
  r.set_wins(row[at + 5].as<uint32_t>());
  r.set_losses(row[at + 6].as<uint32_t>());
  r.set_draws(row[at + 7].as<uint32_t>());
  const int64_t placements = row[at + 8].as<int64_t>();
  r.set_mean_placement(r.games() > 0 ? static_cast<double>(placements) / r.games() : 0);
  r.set_last_match_at_ms(row[at + 9].as<int64_t>());
  r.set_provisional(row[at + 10].as<bool>());
  return r;
}

// A page of one part of the ladder (`provisional`: "true" or "false"), from the top or after the
// cursor ($3, $4): one range of the index (mode_id, provisional, displayed DESC, player_id DESC),
// walked from its start or from the row after the cursor by one row comparison.
std::string LadderPart(const char* provisional, bool after) {
  return std::string("SELECT r.player_id, ") + kRatingColumns +
         " FROM player_ratings r"
         " WHERE r.mode_id = (SELECT m.mode_id FROM modes m WHERE m.mode = $1) "
         "AND r.provisional = " +
         provisional + (after ? " AND (r.displayed, r.player_id) < ($3::float8, $4::text)" : "") +
         " ORDER BY r.displayed DESC, r.player_id DESC LIMIT $2";
}

// A page of the whole ladder, provisional players too: the two parts' pages merged, so a page
// reads at most twice its length of the index, however the two are interleaved.
std::string WholeLadder(bool after) {
  return "SELECT * FROM ((" + LadderPart("false", after) + ") UNION ALL (" +
         LadderPart("true", after) + ")) page ORDER BY page.displayed DESC, page.player_id DESC " +
         "LIMIT $2";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> LadderStatements() {
  return {
      {"declare_mode",
       "SELECT status, mode, system, model, parameters, rated, min_teams, max_teams, "
       "min_team_size, max_team_size, in_use, declared_at_ms, provisional_games, closed, "
       "seed_mode, seed_keep, seed_deviation, seed_mean FROM verdict_declare_mode($1, $2, $3, "
       "$4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"},
      {"mode", std::string("SELECT ") + kModeColumns + " FROM modes m WHERE m.mode = $1"},
      {"ladder_top", LadderPart("false", false)},
      {"ladder_after", LadderPart("false", true)},
      {"ladder_all_top", WholeLadder(false)},
      {"ladder_all_after", WholeLadder(true)},
      {"import_rating",
       "SELECT status, rating, deviation, volatility, displayed, games, wins, losses, draws, "
       "placements, last_match_at_ms, provisional FROM verdict_import_rating($1, $2, $3, $4, "
       "$5, $6)"},
      // The players of a room just allocated who are new to its mode and have a rating in the
      // mode's seed, with the mode's system and soft reset; none for a mode without a seed.
      {"seed_sources",
       "SELECT s.player_id, o.rating, o.deviation, o.volatility, m.system, m.model, "
       "m.parameters::text, m.seed_keep, m.seed_deviation, m.seed_mean "
       "FROM modes m "
       "JOIN battle_room_seats s ON s.room_id = $1 AND s.rating_at_allocation IS NULL "
       "JOIN player_ratings o ON o.mode_id = m.seed_mode_id AND o.player_id = s.player_id "
       "WHERE m.mode = $2 AND m.seed_mode_id IS NOT NULL ORDER BY s.player_id"},
      {"seed_ratings",
       "SELECT verdict_seed_ratings($1, $2, $3::text[], $4::float8[], $5::float8[], "
       "$6::float8[], $7::float8[])"},
      // The inactivity pass (AgeIdleRatingsIn): the modes that age, from a mode key on; the end
      // of a batch's range of one mode's ratings by key; its ratings due to age, locked unless
      // another transaction holds them; and their aged deviations written.
      {"aging_modes",
       "SELECT mode_id, system, model, parameters::text FROM modes WHERE rated "
       "AND (parameters ? 'tau_idle' OR parameters ? 'period_days') AND mode_id >= $1 "
       "ORDER BY mode_id"},
      {"aging_range",
       "SELECT count(*), max(x.player_id) FROM (SELECT r.player_id FROM player_ratings r "
       "WHERE r.mode_id = $1 AND r.player_id > $2 ORDER BY r.player_id LIMIT $3) x"},
      {"aging_due",
       "SELECT r.player_id, r.rating, r.deviation, r.volatility, "
       "(extract(epoch FROM coalesce(r.aged_through, r.last_match_at)) * 1000)::bigint, "
       "(extract(epoch FROM now()) * 1000)::bigint FROM player_ratings r "
       "WHERE r.mode_id = $1 AND r.player_id > $2 AND r.player_id <= $3 "
       "AND coalesce(r.aged_through, r.last_match_at) <= now() - make_interval(secs => $4) "
       "AND r.deviation < $5 ORDER BY r.player_id FOR UPDATE SKIP LOCKED"},
      {"aging_write",
       "UPDATE player_ratings r SET deviation = x.deviation, displayed = x.displayed, "
       "aged_through = timestamptz 'epoch' + x.through_ms * interval '1 millisecond' "
       "FROM unnest($2::text[], $3::float8[], $4::float8[], $5::bigint[]) "
       "AS x(pid, deviation, displayed, through_ms) "
       "WHERE r.mode_id = $1 AND r.player_id = x.pid"},
      {"player", "SELECT verdict_player_room(player_id) FROM players WHERE player_id = $1"},
      {"player_ratings", std::string("SELECT m.mode, m.system, ") + kRatingColumns +
                             " FROM player_ratings r JOIN modes m ON m.mode_id = r.mode_id "
                             "WHERE r.player_id = $1 ORDER BY m.mode"},
  };
}

Result<DeclareOutcome> DeclareModeIn(pg::Pool& pool, const v1::Mode& mode) {
  return pg::Run<DeclareOutcome>(
      pool, "declare mode", [&](pg::Pool::Lease& lease) -> Result<DeclareOutcome> {
        pqxx::work tx(lease.conn());
        // NULL for what the call leaves out (lobby/modes.h's CompleteMode): a body that only
        // opens or closes a mode has no declaration, `closed` absent leaves it as it is, and a
        // mode without a seed has none.
        const bool declared = !OnlyOpensOrCloses(mode);
        const auto given = [&](auto value) {
          return declared ? std::optional(value) : std::nullopt;
        };
        const bool seeded = declared && mode.has_seed_from();
        const auto seed = [&](auto value) { return seeded ? std::optional(value) : std::nullopt; };
        const v1::RoomShape& shape = mode.shape();
        const v1::SoftReset& reset = mode.seed_from().soft_reset();
        const pqxx::row row = tx.exec_prepared1(
            "declare_mode", mode.mode(), given(mode.rating().system()),
            given(mode.rating().model()), given(StoredParameters(SpecOf(mode.rating()).parameters)),
            given(mode.rated()), given(static_cast<int>(shape.min_teams())),
            given(static_cast<int>(shape.max_teams())),
            given(static_cast<int>(shape.min_team_size())),
            given(static_cast<int>(shape.max_team_size())),
            given(static_cast<int>(mode.provisional_games())),
            mode.has_closed() ? std::optional(mode.closed()) : std::nullopt,
            seed(mode.seed_from().mode()), seed(reset.keep()), seed(reset.deviation()),
            seed(reset.mean()));
        auto status = StatusFromSql(kDeclareStatuses, "declaration", row[0].as<std::string>());
        if (!status.ok()) return status.status();
        if (row[2].is_null()) return DeclareOutcome{*status, {}};  // refused: no mode
        tx.commit();
        return DeclareOutcome{*status, ModeFromRow(row, 1)};
      });
}

Result<std::optional<v1::Mode>> GetModeIn(pg::Pool& pool, const std::string& mode) {
  return pg::Run<std::optional<v1::Mode>>(pool, "get mode", [&](pg::Pool::Lease& lease) {
    pqxx::nontransaction tx(lease.conn());
    const pqxx::result rows = tx.exec_prepared("mode", mode);
    if (rows.empty()) return std::optional<v1::Mode>();
    return std::optional<v1::Mode>(ModeFromRow(rows[0], 0));
  });
}

Result<std::optional<v1::Leaderboard>> GetLeaderboardIn(pg::Pool& pool, const std::string& mode,
                                                        size_t limit,
                                                        const std::optional<LadderCursor>& after,
                                                        bool include_provisional) {
  return pg::Run<std::optional<v1::Leaderboard>>(pool, "leaderboard", [&](pg::Pool::Lease& lease) {
    // One snapshot for the mode and its page.
    pqxx::read_transaction tx(lease.conn());
    const pqxx::result found = tx.exec_prepared("mode", mode);
    if (found.empty()) return std::optional<v1::Leaderboard>();
    const std::string system = found[0][1].as<std::string>();
    const std::string top = include_provisional ? "ladder_all_top" : "ladder_top";
    const std::string next = include_provisional ? "ladder_all_after" : "ladder_after";
    const pqxx::result rows =
        after ? tx.exec_prepared(next, mode, limit, after->displayed, after->player_id)
              : tx.exec_prepared(top, mode, limit);
    v1::Leaderboard board;
    board.set_mode(mode);
    for (const auto& row : rows) {
      v1::Leaderboard::Entry* entry = board.add_entries();
      entry->set_player_id(row[0].as<std::string>());
      *entry->mutable_rating() = RatingFromRow(row, 1, mode, system);
    }
    if (rows.size() == limit && limit > 0) {
      const auto& last = board.entries(board.entries_size() - 1);
      board.set_next(EncodeLadderCursor({last.rating().displayed(), last.player_id()}));
    }
    return std::optional<v1::Leaderboard>(std::move(board));
  });
}

Result<ImportOutcome> ImportRatingIn(pg::Pool& pool, const std::string& player_id,
                                     const std::string& mode, const v1::RatingImport& rating,
                                     double displayed) {
  return pg::Run<ImportOutcome>(
      pool, "import rating", [&](pg::Pool::Lease& lease) -> Result<ImportOutcome> {
        pqxx::work tx(lease.conn());
        const pqxx::row row = tx.exec_prepared1("import_rating", player_id, mode, rating.rating(),
                                                rating.deviation(), rating.volatility(), displayed);
        auto status = StatusFromSql(kImportStatuses, "import", row[0].as<std::string>());
        if (!status.ok()) return status.status();
        ImportOutcome out;
        out.status = *status;
        if (out.status != ImportStatus::kImported) return out;
        const pqxx::result system = tx.exec_prepared("mode", mode);
        out.rating =
            RatingFromRow(row, 1, mode, system.empty() ? "" : system[0][1].as<std::string>());
        tx.commit();
        return out;
      });
}

Result<std::optional<v1::Player>> GetPlayerIn(pg::Pool& pool, const std::string& player_id) {
  return pg::Run<std::optional<v1::Player>>(pool, "get player", [&](pg::Pool::Lease& lease) {
    pqxx::read_transaction tx(lease.conn());
    const pqxx::result player = tx.exec_prepared("player", player_id);
    if (player.empty()) return std::optional<v1::Player>();
    v1::Player p;
    p.set_player_id(player_id);
    p.set_in_battle_room(player[0][0].as<uint64_t>());
    bool rated_in_default = false;
    for (const auto& row : tx.exec_prepared("player_ratings", player_id)) {
      v1::ModeRating* r = p.add_ratings();
      *r = RatingFromRow(row, 2, row[0].as<std::string>(), row[1].as<std::string>());
      // The fields of readers from before modes: the "default" mode's.
      if (r->mode() == "default") {
        rated_in_default = true;
        p.set_elo(static_cast<int32_t>(std::llround(rating::WithinRatingBounds(r->rating()))));
        p.set_games(r->games());
        p.set_wins(r->wins());
        p.set_losses(r->losses());
        p.set_draws(r->draws());
      }
    }
    if (!rated_in_default) {  // the rating a player new to the "default" mode has there
      const pqxx::result found = tx.exec_prepared("mode", std::string("default"));
      if (!found.empty()) {
        const v1::Mode m = ModeFromRow(found[0], 0);
        const auto initial = m.rating().parameters().find("initial_rating");
        if (initial != m.rating().parameters().end()) {
          p.set_elo(
              static_cast<int32_t>(std::llround(rating::WithinRatingBounds(initial->second))));
        }
      }
    }
    return std::optional<v1::Player>(std::move(p));
  });
}

namespace {

constexpr int64_t kMsPerDay = 86'400'000;
// Ratings per transaction of the inactivity pass: each holds its rows' locks for one such batch.
constexpr int kAgingBatch = 500;

// A mode that ages, as the inactivity pass reads it.
struct AgingMode {
  int32_t mode_id = 0;
  std::unique_ptr<rating::RatingSystem> system;
  double unit_days = 1;  // it ages by whole ones: OpenSkill's days, Glicko-2's periods
};

Result<AgingMode> AgingModeOf(const pqxx::row& row) {
  AgingMode mode;
  mode.mode_id = row[0].as<int32_t>();
  auto parameters = ParametersFromStored(row[3].as<std::string>());
  if (!parameters.ok()) return parameters.status();
  if (const auto period = parameters->find("period_days"); period != parameters->end()) {
    mode.unit_days = period->second;
  }
  auto system = rating::MakeRatingSystem(
      {row[1].as<std::string>(), row[2].as<std::string>(), std::move(*parameters)},
      rating::Declaration::kStored);
  if (!system.ok())
    return InternalError("mode key " + row[0].as<std::string>() + ": " + system.status().message());
  mode.system = std::move(*system);
  return mode;
}

// One batch of the pass: the ratings of `mode` after `after`, up to `limit` of them, in a
// transaction of its own. Returns how many it looked at and aged, and the last it looked at.
struct AgingBatch {
  int scanned = 0;
  int aged = 0;
  std::string last;
};

AgingBatch AgeBatch(pqxx::connection& conn, const AgingMode& mode, const std::string& after,
                    int limit) {
  pqxx::work tx(conn);
  const pqxx::row range = tx.exec_prepared1("aging_range", mode.mode_id, after, limit);
  AgingBatch batch{range[0].as<int>(), 0, range[1].is_null() ? after : range[1].as<std::string>()};
  if (batch.scanned == 0) return batch;
  const double cap = mode.system->Initial().deviation;
  const pqxx::result due = tx.exec_prepared("aging_due", mode.mode_id, after, batch.last,
                                            mode.unit_days * kMsPerDay / 1000, cap);
  pg::ArrayLiteral players, deviations, displayed, through;
  for (const pqxx::row& row : due) {
    const rating::Rating rating{row[1].as<double>(), row[2].as<double>(), row[3].as<double>()};
    const int64_t since_ms = row[4].as<int64_t>();
    const double units = std::floor(static_cast<double>(row[5].as<int64_t>() - since_ms) /
                                    (mode.unit_days * kMsPerDay));
    if (units < 1) continue;
    auto aged = mode.system->Idle(rating, units * mode.unit_days);
    if (!aged.ok()) continue;  // a rating stored beyond today's bounds stays as it is
    players.AddText(row[0].as<std::string>());
    deviations.Add(aged->deviation);
    displayed.Add(mode.system->Displayed(*aged));
    through.Add(since_ms + static_cast<int64_t>(std::llround(units * mode.unit_days * kMsPerDay)));
    ++batch.aged;
  }
  if (batch.aged > 0) {
    tx.exec_prepared("aging_write", mode.mode_id, std::move(players).str(),
                     std::move(deviations).str(), std::move(displayed).str(),
                     std::move(through).str());
  }
  tx.commit();
  return batch;
}

}  // namespace

Result<AgingPass> AgeIdleRatingsIn(pg::Pool& pool, const AgingPlace& from, int limit) {
  return pg::Run<AgingPass>(
      pool, "age idle ratings", [&](pg::Pool::Lease& lease) -> Result<AgingPass> {
        std::vector<AgingMode> modes;
        {
          pqxx::nontransaction tx(lease.conn());
          for (const pqxx::row& row : tx.exec_prepared("aging_modes", from.mode_id)) {
            auto mode = AgingModeOf(row);
            if (!mode.ok()) return mode.status();
            modes.push_back(std::move(*mode));
          }
        }
        AgingPass pass;
        for (const AgingMode& mode : modes) {
          std::string after = mode.mode_id == from.mode_id ? from.player_id : "";
          while (pass.scanned < limit) {
            const int size = std::min(kAgingBatch, limit - pass.scanned);
            const AgingBatch batch = AgeBatch(lease.conn(), mode, after, size);
            pass.scanned += batch.scanned;
            pass.aged += batch.aged;
            after = batch.last;
            if (batch.scanned < size) break;  // the mode's last ratings
          }
          if (pass.scanned >= limit) {
            pass.next = {mode.mode_id, after};
            return pass;
          }
        }
        return pass;  // round every mode: the next call starts again
      });
}

Status SeedSeasonRatings(pqxx::work& tx, uint64_t room_id, const std::string& mode) {
  const pqxx::result sources = tx.exec_prepared("seed_sources", room_id, mode);
  if (sources.empty()) return Status::Ok();
  const pqxx::row& first = sources[0];
  auto parameters = ParametersFromStored(first[6].as<std::string>());
  if (!parameters.ok()) return parameters.status();
  auto system = rating::MakeRatingSystem(
      {first[4].as<std::string>(), first[5].as<std::string>(), std::move(*parameters)},
      rating::Declaration::kStored);
  if (!system.ok()) return InternalError("mode " + mode + ": " + system.status().message());
  const rating::SeasonReset reset{.mean = first[9].as<double>(),
                                  .keep = first[7].as<double>(),
                                  .deviation = first[8].as<double>()};
  pg::ArrayLiteral players, ratings, deviations, volatilities, displayed;
  for (const pqxx::row& row : sources) {
    const rating::Rating last{row[1].as<double>(), row[2].as<double>(), row[3].as<double>()};
    auto seeded = (*system)->ResetForSeason(last, reset);
    if (!seeded.ok()) {  // a rating stored beyond today's bounds: the player starts afresh
      spdlog::warn("room={} mode={} player={}: not seeded from the earlier season: {}", room_id,
                   mode, row[0].as<std::string>(), seeded.status().message());
      continue;
    }
    players.AddText(row[0].as<std::string>());
    ratings.Add(seeded->value);
    deviations.Add(seeded->deviation);
    volatilities.Add(seeded->volatility);
    displayed.Add((*system)->Displayed(*seeded));
  }
  tx.exec_prepared("seed_ratings", room_id, mode, std::move(players).str(),
                   std::move(ratings).str(), std::move(deviations).str(),
                   std::move(volatilities).str(), std::move(displayed).str());
  return Status::Ok();
}

}  // namespace verdict::lobby
