// The PostgreSQL store's reads and writes of modes, ladders and players' ratings (docs/lobby.md,
// "Modes and ladders"), on the store's pool: LadderStore's calls for PgStore (lobby/pg_store.h),
// each through pg::Run. Internal to that store; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "lobby/pg/pool.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

// The statements these run, for the pool to prepare on every connection.
std::vector<std::pair<std::string, std::string>> LadderStatements();

Result<DeclareOutcome> DeclareModeIn(pg::Pool& pool, const v1::Mode& mode);
Result<std::optional<v1::Mode>> GetModeIn(pg::Pool& pool, const std::string& mode);
Result<std::optional<v1::Leaderboard>> GetLeaderboardIn(pg::Pool& pool, const std::string& mode,
                                                        size_t limit,
                                                        const std::optional<LadderCursor>& after,
                                                        bool include_provisional);
Result<ImportOutcome> ImportRatingIn(pg::Pool& pool, const std::string& player_id,
                                     const std::string& mode, const v1::RatingImport& rating,
                                     double displayed);
Result<std::optional<v1::Player>> GetPlayerIn(pg::Pool& pool, const std::string& player_id);

// InactivityStore::AgeIdleRatings (lobby/settlement_store.h).
Result<AgingPass> AgeIdleRatingsIn(pg::Pool& pool, const AgingPlace& from, int limit);

// In the transaction `tx` of the allocation that seated `room_id` in `mode` (verdict_allocate,
// whose player locks it still holds): seeds each of its players new to the mode from their last
// rating in the mode's seed, if it has one, by the mode's soft reset
// (sql/functions/verdict_seed_ratings.sql). INTERNAL for a mode whose stored declaration its
// system refuses; a libpqxx exception for the database's failures (pg::Run translates them).
Status SeedSeasonRatings(pqxx::work& tx, uint64_t room_id, const std::string& mode);

}  // namespace verdict::lobby
