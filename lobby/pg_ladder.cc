#include "lobby/pg_ladder.h"

#include <cmath>
#include <map>

#include <pqxx/pqxx>

#include "lobby/ladder_cursor.h"
#include "lobby/modes.h"
#include "lobby/pg/run.h"
#include "lobby/pg_statuses.h"
#include "lobby/rating/rating_system.h"

namespace verdict::lobby {
namespace {

// A mode row's columns, in the order every statement below returns them.
constexpr char kModeColumns[] =
    "m.mode, m.system, m.model, m.parameters::text, m.rated, m.min_teams, m.max_teams, "
    "m.min_team_size, m.max_team_size, m.in_use, (extract(epoch FROM m.declared_at) * "
    "1000)::bigint";

// A player_ratings row's columns after its mode and player: every statement below that reads one.
constexpr char kRatingColumns[] =
    "r.rating, r.deviation, r.volatility, r.displayed, r.games, r.wins, r.losses, r.draws, "
    "r.placements, coalesce((extract(epoch FROM r.last_match_at) * 1000)::bigint, 0)";

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
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> LadderStatements() {
  return {
      {"declare_mode",
       "SELECT status, mode, system, model, parameters, rated, min_teams, max_teams, "
       "min_team_size, max_team_size, in_use, declared_at_ms FROM verdict_declare_mode($1, $2, "
       "$3, $4::jsonb, $5, $6, $7, $8, $9)"},
      {"mode", std::string("SELECT ") + kModeColumns + " FROM modes m WHERE m.mode = $1"},
      // A page of the ladder: the index (mode_id, displayed DESC, player_id DESC) walked from
      // the top, or from the row after the cursor by one row comparison.
      {"ladder_top", std::string("SELECT r.player_id, ") + kRatingColumns +
                         " FROM player_ratings r"
                         " WHERE r.mode_id = (SELECT m.mode_id FROM modes m WHERE m.mode = $1) "
                         "ORDER BY r.displayed DESC, r.player_id DESC LIMIT $2"},
      {"ladder_after", std::string("SELECT r.player_id, ") + kRatingColumns +
                           " FROM player_ratings r"
                           " WHERE r.mode_id = (SELECT m.mode_id FROM modes m WHERE m.mode = $1) "
                           "AND (r.displayed, r.player_id) < ($3::float8, $4::text) "
                           "ORDER BY r.displayed DESC, r.player_id DESC LIMIT $2"},
      {"import_rating",
       "SELECT status, rating, deviation, volatility, displayed, games, wins, losses, draws, "
       "placements, last_match_at_ms FROM verdict_import_rating($1, $2, $3, $4, $5, $6)"},
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
        const v1::RoomShape& shape = mode.shape();
        const pqxx::row row = tx.exec_prepared1(
            "declare_mode", mode.mode(), mode.rating().system(), mode.rating().model(),
            StoredParameters(SpecOf(mode.rating()).parameters), mode.rated(),
            static_cast<int>(shape.min_teams()), static_cast<int>(shape.max_teams()),
            static_cast<int>(shape.min_team_size()), static_cast<int>(shape.max_team_size()));
        auto status = StatusFromSql(kDeclareStatuses, "declaration", row[0].as<std::string>());
        if (!status.ok()) return status.status();
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
                                                        const std::optional<LadderCursor>& after) {
  return pg::Run<std::optional<v1::Leaderboard>>(pool, "leaderboard", [&](pg::Pool::Lease& lease) {
    // One snapshot for the mode and its page.
    pqxx::read_transaction tx(lease.conn());
    const pqxx::result found = tx.exec_prepared("mode", mode);
    if (found.empty()) return std::optional<v1::Leaderboard>();
    const std::string system = found[0][1].as<std::string>();
    const pqxx::result rows =
        after ? tx.exec_prepared("ladder_after", mode, limit, after->displayed, after->player_id)
              : tx.exec_prepared("ladder_top", mode, limit);
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

}  // namespace verdict::lobby
